"""The data path on real files of the mirror: prepare keeps every test sentence, the training
filters remove what they should, vocabularies are deterministic, params errors name the key."""

from __future__ import annotations

import html
import json
import random
import re
import tempfile
import textwrap
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from s2s import config
from s2s.config import ConfigError, CorpusRef, DataConfig, PrepareConfig, VocabConfig
from s2s.data import prepare, vocab
from s2s.data.batching import epoch_batches
from s2s.data.text import CorpusError, normalize, read_corpus
from s2s.io import iter_lines, read_lines
from s2s.layout import PreparePaths, VocabPaths
from s2s.stages import download as download_stage
from s2s.stages import prepare as prepare_stage
from s2s.stages import vocab as vocab_stage

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def newstest(tmp_path_factory, mirror):
    """newstest2014 (full, 3003 sentences) + a giga-fren slice through download and prepare."""
    tmp = tmp_path_factory.mktemp("prep")
    data = DataConfig(train=(CorpusRef("wmt14.giga_fren", 2000),),
                      dev=(CorpusRef("wmt.newstest2013", 100),),
                      test=CorpusRef("wmt14.newstest2014"))
    download_stage.main(data, out_dir=tmp / "raw", mirror=mirror)
    metrics = prepare_stage.main(data, PrepareConfig(max_len=50, max_ratio=1.5), PreparePaths(
        raw=tmp / "raw", out=tmp / "prepared", metrics=tmp / "prepare.json"))
    return tmp, metrics


def test_all_3003_newstest2014_sentences_survive_prepare(newstest, mirror):
    tmp, metrics = newstest
    assert metrics["splits"]["test"]["wmt14.newstest2014"]["lines_out"] == 3003
    refs = read_corpus(tmp / "prepared" / "test.raw.fr", "plain")
    assert len(refs) == 3003
    # Read from the SGML as sacreBLEU does: identical to the mirror's sacreBLEU-style extraction.
    expected = (mirror / "wmt14-newstest2014-fren/newstest2014-fren.fr").read_text().splitlines()
    assert refs == expected
    assert not any("\u00a0" in r for r in refs)  # 707 references had no-break spaces
    tok = read_corpus(tmp / "prepared" / "test.tok.fr", "plain")
    assert len(tok) == 3003 and tok[0] != refs[0]  # tokenised: "« ... »" split from words


def test_prepare_metrics_count_every_filter(newstest):
    tmp, metrics = newstest
    giga = metrics["splits"]["train"]["wmt14.giga_fren"]
    assert giga["lines_in"] == 2000
    assert giga["lines_out"] + sum(giga["removed"].values()) == 2000
    assert giga["lines_out"] == len(read_corpus(tmp / "prepared" / "train.tok.en", "plain"))
    on_disk = json.loads((tmp / "prepare.json").read_text())
    assert on_disk == metrics


def test_training_filters_remove_what_they_should():
    en = ["a b c", "", "one two three four five six", "x", "same pair", "same pair",
          "w " * 60, "the cat sat"]
    fr = ["d e f", "vide", "un", "y", "même paire", "même paire", "w " * 60, "le chat"]
    cfg = PrepareConfig(max_len=50, max_ratio=1.5)
    out_en, out_fr = [], []

    def write(e: list[str], f: list[str]) -> None:
        out_en.extend(e)
        out_fr.extend(f)

    counts = prepare.filter_train([list(zip(en, fr))], cfg, workers=1, seen=prepare.SeenPairs(),
                                  write=write)
    assert counts.removed == {"empty": 1, "too_long": 1, "ratio": 1, "duplicate": 1}
    assert out_en == ["a b c", "x", "same pair", "the cat sat"]
    assert out_fr == ["d e f", "y", "même paire", "le chat"]
    assert counts.lines_out == 4 and counts.tokens_en == 3 + 1 + 2 + 3


def test_the_filters_edges_max_len_the_ratio_and_its_minimum_length():
    """A side of exactly max_len tokens is kept, one more is too long; a ratio of exactly
    max_ratio is kept; the ratio filter applies only where the longer side has ratio_min_len
    tokens or more (a 3-to-1 pair under it is kept)."""
    pairs = [("a b c d e f", "u v w x y z"),  # 6 and 6: at max_len, kept
             ("a b c d e f g", "u v w x y z"),  # 7: too long
             ("a b c", "x"),  # ratio 3, but the longer side 3 < ratio_min_len: kept
             ("a b c d", "x"),  # ratio 4, the longer side at ratio_min_len: removed
             ("a b c d e f", "u v w x")]  # ratio 1.5 = max_ratio: kept (only beyond it)
    cfg = PrepareConfig(max_len=6, max_ratio=1.5, ratio_min_len=4)
    out_en = []
    counts = prepare.filter_train([pairs], cfg, workers=1, seen=prepare.SeenPairs(),
                                  write=lambda e, f: out_en.extend(e))
    assert counts.removed == {"empty": 0, "too_long": 1, "ratio": 1, "duplicate": 0}
    assert out_en == ["a b c d e f", "a b c", "a b c d e f"]


def test_a_dev_or_test_line_of_max_words_is_kept_one_more_is_refused():
    n = prepare.MAX_EVAL_WORDS
    assert prepare.long_line(["a " * n, "b"]) is None
    assert prepare.long_line(["x", "a " * (n + 1), "a " * (n + 5)]) == (2, n + 1)


def test_the_unknown_rate_of_no_tokens_is_0():
    from s2s.data.vocab import unk_rate

    assert unk_rate([], {"a"}) == 0.0 and unk_rate(["", " "], {"a"}) == 0.0
    assert unk_rate(["a b", "b c a"], {"a"}) == pytest.approx(3 / 5)


def test_moses_escaped_corpus_keeps_its_tokens(tmp_path, mirror):
    """The Moses-tokenised Europarl sample goes through prepare's tokeniser as raw text does:
    "l' homme" stays "l' homme" (re-tokenising it as it was gave "l ' homme", 547 of these 999
    fr pairs and 21 en), so its apostrophes are tokenised as the raw test sets' are."""
    sample = "wmt14-train-europarl-v7-sample20k-tok/europarl-v7.fr-en.sample20k.tok"
    folder = tmp_path / "raw" / "wmt14.europarl_v7_sample20k_tok"
    folder.mkdir(parents=True)
    head = {}
    for lang in ("en", "fr"):
        head[lang] = (mirror / f"{sample}.{lang}").read_text(encoding="utf-8").split("\n")[:1000]
        (folder / f"{lang}.txt").write_text("\n".join(head[lang]) + "\n", encoding="utf-8")
    (chunk,) = prepare.iter_raw_pairs(tmp_path / "raw",
                                      CorpusRef("wmt14.europarl_v7_sample20k_tok", 1000))
    out = prepare.filter_chunk((chunk, PrepareConfig(max_len=1000, max_ratio=1000.0)))
    kept = [n for n in range(1000) if head["en"][n].strip() and head["fr"][n].strip()]
    assert len(kept) == len(out.en) == 999
    differ = {}
    for lang, toks in (("en", out.en), ("fr", out.fr)):
        want = [" ".join(html.unescape(head[lang][n]).split()) for n in kept]
        differ[lang] = [(w, t) for w, t in zip(want, toks) if w != t]
    assert out.fr[:2] == ["C' est déjà de l' histoire ancienne .",
                          "Les droits de l' homme sont indivisibles ."]
    assert "No we haven 't , have we ?" in out.en
    assert differ["fr"] == []
    # The one en line that differs is one the sample's own tokeniser left as "dignity.'" (and
    # without the space sacremoses leaves after the quote: test_a_tokenised_line_has_single_...)
    assert [t for _, t in differ["en"]] == [
        "Nothing is dearer to them than their regained human dignity . '"]


def test_normalize_spaces_and_controls():
    assert normalize("«\u00a0Oui\u00a0»  dit-il\t\u2009!\x07") == "« Oui » dit-il !"


def test_normalize_drops_controls_before_composing_so_the_result_is_nfc():
    # A dropped character between a letter and its combining accent: composed once it is gone
    # (NFC first left the accent apart: "cafe\u0301", not NFC though the docstring says NFC).
    for ch in "\u200b\ufeff\x00\x07\x7f":
        out = normalize(f"cafe{ch}\u0301 cre\u0300{ch}\u0300me")
        assert out == "caf\u00e9 cr\u00e8\u0300me", ascii(out)
        assert unicodedata.is_normalized("NFC", out)
    # A whitespace control is a space, which separates the accent from the letter either way.
    assert normalize("e\x1c\u0301") == "e \u0301"


def test_whitespace_controls_separate_words_as_in_sacrebleu(tmp_path):
    # \v \f and the separators \x1c-\x1f are whitespace to sacreBLEU's re.sub(r"\s+", " ", s):
    # dropping them as controls merged two words.
    for ch in "\x0b\x0c\x1c\x1d\x1e\x1f":
        assert normalize(f"left{ch}right ") == "left right" == re.sub(r"\s+", " ", f"left{ch}right")
    path = tmp_path / "c.txt"
    path.write_text("left\x0cright\nit\x92s\nnul\x00here\na\x1fb\x7f\nplain\n", encoding="utf-8")
    counts: dict[str, int] = {}
    lines = [normalize(s) for s in read_corpus(path, "plain", counts)]
    assert lines == ["left right", "it\x92s", "nulhere", "a b", "plain"]  # C1 \x92 kept
    # Counted: the lines that lost a character (NUL, DEL), not those whose \f or \x1f became a
    # space, nor the kept C1 control.
    assert counts == {"bom_files": 0, "crlf_lines": 0, "control_char_lines": 2,
                      "cr_inside_lines": 0}


def test_the_docs_name_the_control_characters_normalize_drops():
    chars = [*range(0xA1), 0x2028, 0x200B, 0xFEFF]
    dropped = {c for c in chars if normalize(f"a{chr(c)}b") == "ab"}
    spaced = {c for c in chars if normalize(f"a{chr(c)}b") == "a b"}
    assert dropped == {*range(0x09), *range(0x0E, 0x1C), 0x7F, 0x200B, 0xFEFF}
    assert spaced == {*range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x2028}
    assert all(normalize(f"a{chr(c)}b") == f"a{chr(c)}b" for c in range(0x80, 0xA0) if c != 0x85)
    # ... which is what the docs say: C1 controls are kept (they said all were dropped).
    guarantees = " ".join((ROOT / "docs" / "crash-guarantees.md").read_text().split())
    assert ("the C0 controls but whitespace (NUL among them), DEL, U+200B and U+FEFF are dropped; "
            "the C1 controls (U+0080-U+009F) are kept") in guarantees
    assert "the C1 controls U+0080-U+009F are kept" in " ".join(prepare_stage.__doc__.split())
    assert "but U+0085 (NEL), which Unicode counts as whitespace, becomes a space" in guarantees


def test_misaligned_corpus_names_both_files(tmp_path):
    folder = tmp_path / "raw" / "multi30k.val"
    folder.mkdir(parents=True)
    (folder / "en.txt").write_text("a\nb\nc\n")
    (folder / "fr.txt").write_text("a\nb\n")
    with pytest.raises(CorpusError, match=r"en\.txt has 3 lines, .*fr\.txt has 2"):
        prepare.read_pair(tmp_path / "raw", CorpusRef("multi30k.val"))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:3: not valid UTF-8"):
        read_corpus(path, "plain")


def test_sgm_without_closing_tag(tmp_path):
    path = tmp_path / "x.sgm"
    path.write_text('<doc>\n<seg id="1">ok</seg>\n<seg id="2">broken\n</doc>\n')
    with pytest.raises(CorpusError, match=r"x\.sgm:3: <seg> without </seg>"):
        read_corpus(path, "sgm")


def test_of_two_faults_in_one_block_the_first_is_named(tmp_path):
    """A <seg> without </seg> on line 2 and a line of old Mac line ends on line 4, both in the
    first block read: the error names line 2, as where the blocks fall never changes."""
    path = tmp_path / "two.sgm"
    path.write_bytes(b'<srcset>\n<seg id="1">cut\n<seg id="2">ok</seg>\n'
                     b'<seg id="3">a\rb\rc</seg>\n</srcset>\n')
    with pytest.raises(CorpusError, match=r"two\.sgm:2: <seg> without </seg>"):
        read_corpus(path, "sgm")
    path.write_bytes(b'<srcset>\n<seg id="3">a\rb\rc</seg>\n<seg id="1">cut\n</srcset>\n')
    with pytest.raises(CorpusError, match=r"two\.sgm:2: 2 carriage returns \(CR\) inside"):
        read_corpus(path, "sgm")


def test_a_tokenised_line_has_single_spaces_and_its_duplicate_is_removed(tmp_path):
    """sacremoses leaves a space at the end of English "said 'no.'": the prepared line kept it,
    and the pair whose text tokenises to the same words was not taken for its duplicate."""
    from s2s.data.text import tokenize

    assert tokenize("He said 'no.'", "en") == "He said ' no . '"
    raw = tmp_path / "raw"
    for corpus, en, fr in (("multi30k.train", ["He said 'no.'", "He said ' no . '"],
                            ["Il a dit non.", "Il a dit non."]),
                           ("multi30k.val", ["x"], ["y"]),
                           ("multi30k.test_2016_flickr", ["x"], ["y"])):
        (raw / corpus).mkdir(parents=True)
        (raw / corpus / "en.txt").write_text("".join(s + "\n" for s in en), encoding="utf-8")
        (raw / corpus / "fr.txt").write_text("".join(s + "\n" for s in fr), encoding="utf-8")
    data = DataConfig(train=(CorpusRef("multi30k.train"),), dev=(CorpusRef("multi30k.val"),),
                      test=CorpusRef("multi30k.test_2016_flickr"))
    got = prepare_stage.main(data, PrepareConfig(), PreparePaths(
        raw=raw, out=tmp_path / "prepared", metrics=tmp_path / "prepare.json"))
    assert got["splits"]["train"]["multi30k.train"]["removed"]["duplicate"] == 1
    assert read_lines(tmp_path / "prepared" / "train.tok.en", rstrip=False) == [
        "He said ' no . '"]


def test_read_lines_strips_what_its_options_say(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes("\ufeffun\u2028deux \r\ntrois\t\n\nquatre\r".encode("utf-8"))
    # Default, sacreBLEU's reading: LF only ends a line; trailing whitespace (CR too) goes.
    assert read_lines(path) == ["\ufeffun\u2028deux", "trois", "", "quatre"]
    assert read_lines(path, rstrip=False) == ["\ufeffun\u2028deux \r", "trois\t", "",
                                              "quatre\r"]
    counts: dict[str, int] = {}
    assert read_lines(path, rstrip=False, strip_bom=True, strip_cr=True, counts=counts) == [
        "un\u2028deux ", "trois\t", "", "quatre"]
    assert counts == {"bom_files": 1, "crlf_lines": 2}
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "one.txt").write_bytes(b"\n")
    assert read_lines(tmp_path / "empty.txt") == [] and read_lines(tmp_path / "one.txt") == [""]
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(ValueError, match=r"x\.txt:2: not valid UTF-8"):
        read_lines(path)


def lines_by_bytes_split(data: bytes, *, strip_bom: bool, cap: int) -> list[str] | str:
    """What iter_lines(rstrip=False) gives, from bytes.split: the lines, or the message of the
    first line longer than `cap` bytes."""
    if strip_bom and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        if len(line) > cap:
            return f"f.txt:{n}: a line longer than {cap:,} bytes"
    return [line.decode() for line in lines]


def test_iter_lines_splits_as_bytes_split_and_refuses_a_line_over_the_cap(tmp_path):
    # Lines spanning many small blocks, a line just at the cap and one byte over it, CRs, a
    # byte-order mark: the lines of bytes.split(b"\n"), or the first over-long line named.
    rs = random.Random(3)
    pieces = [b"", b"a", b"bb\r", b"ccc ccc", "\u00e9".encode(), b"\r", b"\n", b"\r\n",
              b"w" * 9, b"x" * 17]
    path = tmp_path / "f.txt"
    for _ in range(3000):
        data = b"".join(rs.choice(pieces) for _ in range(rs.randint(0, 30)))
        if rs.random() < 0.2:
            data = b"\xef\xbb\xbf" + data
        path.write_bytes(data)
        cap, block = rs.randint(3, 40), rs.randint(1, 24)
        for strip_bom in (False, True):
            want = lines_by_bytes_split(data, strip_bom=strip_bom, cap=cap)
            try:
                got = [ln for b in iter_lines(path, rstrip=False, strip_bom=strip_bom,
                                              block_bytes=block, max_line_bytes=cap) for ln in b]
            except ValueError as e:
                got = str(e)
                assert "did the file lose its line breaks?" in got
                got = re.sub(r"^.*/(f\.txt:\d+: a line longer than [\d,]+ bytes).*$", r"\1", got)
            assert got == want, (data, cap, block, strip_bom)


def test_a_file_of_cr_line_ends_over_the_line_cap_is_refused_naming_the_line(tmp_path,
                                                                            monkeypatch):
    # A file without LF was read whole into memory as one line, however large.
    monkeypatch.setattr("s2s.io.MAX_LINE_BYTES", 1000)
    path = tmp_path / "mac.txt"
    path.write_bytes(b"first line\n" + b"a sentence .\r" * 100)
    with pytest.raises(CorpusError, match=r"mac\.txt:2: a line longer than 1,000 bytes \(did "
                       r"the file lose its line breaks\? and \d+ carriage returns \(CR\).*"
                       r"tr '\\r' '\\n'"):
        read_corpus(path, "plain")
    path.write_bytes(b"first line\n" + b"w" * 999 + b"\n")
    assert read_corpus(path, "plain") == ["first line", "w" * 999]


def cr_corpus(tmp_path, name, en: bytes, fr: bytes) -> Path:
    folder = tmp_path / "raw" / name
    folder.mkdir(parents=True)
    (folder / "en.txt").write_bytes(en)
    (folder / "fr.txt").write_bytes(fr)
    return tmp_path / "raw"


def test_a_dev_set_of_old_mac_line_ends_is_refused_not_read_as_one_sentence(tmp_path):
    # Three sentences a side, CR only: read as one line each, normalize made the CRs spaces and
    # the dev set one sentence (the metrics said crlf_lines: 2).
    raw = cr_corpus(tmp_path, "wmt.newstest2012", b"hello .\rgood bye .\rsee you .\r",
                    b"bonjour .\rau revoir .\ra plus .\r")
    with pytest.raises(CorpusError, match=r"en\.txt:1: 2 carriage returns \(CR\) inside the "
                       r"line: .*old Mac.*tr '\\r' '\\n'"):
        prepare.read_pair(raw, CorpusRef("wmt.newstest2012"))
    # two sentences, CR only: one line of one CR, every line of the file
    raw = cr_corpus(tmp_path / "two", "wmt.newstest2012", b"hello .\rgood bye .\r",
                    b"bonjour .\rau revoir .\r")
    with pytest.raises(CorpusError, match=r"en\.txt:1: a carriage return \(CR\) inside the line "
                       r"\(1 of the file's 1 lines hold one\).*tr '\\r' ' '"):
        prepare.read_pair(raw, CorpusRef("wmt.newstest2012"))


def test_a_training_corpus_of_old_mac_line_ends_is_refused_naming_its_first_line(tmp_path):
    # 300 pairs, CR only after 2 LF lines: 2,000 such pairs had vanished as one too_long pair.
    en = b"one .\ntwo .\n" + b"".join(b"the house %d .\r" % i for i in range(300))
    fr = b"un .\ndeux .\n" + b"".join(b"la maison %d .\r" % i for i in range(300))
    raw = cr_corpus(tmp_path, "wmt14.europarl_v7", en, fr)
    with pytest.raises(CorpusError, match=r"en\.txt:3: 299 carriage returns \(CR\) inside the "
                       r"line"):
        for _ in prepare.iter_raw_pairs(raw, CorpusRef("wmt14.europarl_v7"), cleaned={}):
            pass
    # after 200 LF lines: one line in 201, its CRs counted (it had been read, one long pair)
    en = b"".join(b"line %d .\n" % i for i in range(200)) + en
    fr = b"".join(b"ligne %d .\n" % i for i in range(200)) + fr
    raw = cr_corpus(tmp_path / "late", "wmt14.europarl_v7", en, fr)
    with pytest.raises(CorpusError, match=r"en\.txt:203: 299 carriage returns"):
        for _ in prepare.iter_raw_pairs(raw, CorpusRef("wmt14.europarl_v7"), cleaned={}):
            pass


def test_a_stray_cr_inside_one_line_in_100_is_kept_as_a_space_and_counted(tmp_path):
    # Web-crawled text may hold a CR inside a sentence: at most 1 line in 100 holding one is read
    # (the CR a space, as before) and counted; CRs that end a line (CR CR LF) are not inside it.
    lines = [b"sentence %d ." % i for i in range(200)]
    lines[5], lines[150] = b"a stray\rcarriage return .", b"another\r one ."
    lines[7] = b"two CRs end this line .\r"
    path = tmp_path / "crawl.txt"
    path.write_bytes(b"\n".join(lines[:7]) + b"\n" + lines[7] + b"\r\n" + b"\n".join(lines[8:]))
    counts: dict[str, int] = {}
    got = [normalize(s) for s in read_corpus(path, "plain", counts)]
    assert got[5] == "a stray carriage return ." and got[150] == "another one ."
    assert got[7] == "two CRs end this line ." and len(got) == 200
    assert counts == {"bom_files": 0, "crlf_lines": 1, "control_char_lines": 0,
                      "cr_inside_lines": 2}
    path.write_bytes(path.read_bytes().replace(b"sentence 9 .", b"sentence\r9 ."))  # 3 in 200
    with pytest.raises(CorpusError, match=r"crawl\.txt:6: .*\(3 of the file's 200 lines"):
        read_corpus(path, "plain")
    # one stray CR in a small file is one line in 50, read
    small = tmp_path / "small.txt"
    small.write_bytes(b"".join(b"s %d .\n" % i for i in range(49)) + b"a\rb .\n")
    assert read_corpus(small, "plain")[-1] == "a\rb ."


def test_vocab_is_ranked_by_count_with_specials_first(tmp_path):
    d = tmp_path / "prepared"
    d.mkdir()
    for split in ("train", "dev", "test"):
        (d / f"{split}.tok.en").write_text("b a b c\nb a\n")
        (d / f"{split}.tok.fr").write_text("x y\nz\n")
    m = vocab_stage.main(VocabConfig(src_size=2, tgt_size=10, min_count=1), VocabPaths(
        prepared=d, out=tmp_path / "vocab", metrics=tmp_path / "vocab.json"))
    lines = (tmp_path / "vocab" / "en.tsv").read_text().splitlines()
    assert lines == ["<pad>\t0", "<unk>\t0", "<bos>\t0", "<eos>\t0", "b\t3", "a\t2"]
    assert m["en"]["unk_rate"]["train"] == pytest.approx(1 / 6, abs=1e-6)  # stored rounded
    v = vocab.Vocab.load(tmp_path / "vocab" / "en.tsv")
    assert v.encode("a b c") == [5, 4, 1]
    # a file cut short, or of another encoding, is named with its line, never read in part
    cut = tmp_path / "cut.tsv"
    cut.write_bytes((tmp_path / "vocab" / "en.tsv").read_bytes()[:-1])  # "a\t2" loses its \n
    with pytest.raises(ValueError, match=re.escape(f"{cut}:6: the last line has no newline")):
        vocab.Vocab.load(cut)
    cut.write_bytes(b"<pad>\t0\n<unk>\t0\n<bos>\t0\n<eos>\t0\nb\xe9\t3\n")
    with pytest.raises(ValueError, match=re.escape(f"{cut}:5: not valid UTF-8")):
        vocab.Vocab.load(cut)


def test_vocab_keeps_words_of_at_least_min_count_and_breaks_ties_by_the_word():
    """min_count is inclusive (the default profile's 2 keeps a word seen twice), and words of one
    count are in the order of their spelling, not of first appearance: the ids are the same
    whatever order the corpus lists them in."""
    from collections import Counter

    counts = Counter({"z": 2, "y": 2, "x": 1, "w": 3, "<unk>": 9})
    assert vocab.build(counts, size=10, min_count=2) == [("w", 3), ("y", 2), ("z", 2)]
    assert vocab.build(counts, size=10, min_count=1) == [("w", 3), ("y", 2), ("z", 2), ("x", 1)]
    assert vocab.build(counts, size=2, min_count=1) == [("w", 3), ("y", 2)]
    assert vocab.build(counts, size=10, min_count=3) == [("w", 3)]


def test_vocab_failing_on_the_french_side_leaves_the_old_folder_whole(tmp_path, monkeypatch):
    d = tmp_path / "prepared"
    d.mkdir()
    for split in ("train", "dev", "test"):
        (d / f"{split}.tok.en").write_text("b a b c\nb a\n")
        (d / f"{split}.tok.fr").write_text("x y\nz\n")
    paths = VocabPaths(prepared=d, out=tmp_path / "vocab", metrics=tmp_path / "vocab.json")
    vocab_stage.main(VocabConfig(src_size=2, tgt_size=10, min_count=1), paths)
    old = {p.name: p.read_bytes() for p in [*paths.out.iterdir(), paths.metrics]}
    assert old["en.tsv"].decode().splitlines()[4:] == ["b\t3", "a\t2"]
    real = vocab_stage.prepared_file

    def fr_fails(folder, split, lang):
        if lang == "fr":
            raise OSError(f"{folder}/{split}.tok.fr: unreadable (the test's failure)")
        return real(folder, split, lang)

    monkeypatch.setattr(vocab_stage, "prepared_file", fr_fails)
    with pytest.raises(OSError, match=r"train\.tok\.fr: unreadable"):
        vocab_stage.main(VocabConfig(src_size=3, tgt_size=10, min_count=1), paths)
    # The new en.tsv (with "c") never replaced the old one; no temporary folder is left.
    assert {p.name: p.read_bytes() for p in [*paths.out.iterdir(), paths.metrics]} == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared", "vocab", "vocab.json"]


def test_batches_depend_on_order_seed_and_epoch_only():
    n = 960  # three full chunks of 10 batches of 32
    lengths = [(i % 17 + 1, i % 13 + 1) for i in range(n)]
    src, tgt = (np.array([x[k] for x in lengths]) for k in (0, 1))

    def plan(seed, epoch):
        return [b.tolist() for b in epoch_batches(src, tgt, batch_size=32, bucket_batches=10,
                                                  seed=seed, epoch=epoch)]

    a = plan(5, 2)
    assert a == plan(5, 2)
    assert a != plan(6, 2)
    assert a != plan(5, 3)
    assert sorted(i for b in a for i in b) == list(range(n))  # every pair once per epoch
    spread = [max(lengths[i][0] for i in b) - min(lengths[i][0] for i in b) for b in a]
    # Bucketing: ~19 pairs per length in a chunk of 320, so a batch of 32 spans 2-4 adjacent
    # lengths; unbucketed batches span ~16.
    assert max(spread) <= 4 and sum(spread) / len(spread) < 2.5


@pytest.mark.parametrize("edit, message", [
    (("  lr: 0.7", "  lr: fast"), r"'train\.lr' must be a number, got str"),
    (("  lr: 0.7", "  lr: -1"), r"'train\.lr' must be > 0.0"),
    (("  clip_norm: 5.0", "  clip_norm: 5.0\n  momentum: 0.9"), r"unknown key 'train\.momentum'"),
    (("beams: [1, 2, 12]", "beams: [0, 2, 12]"), r"'systems\.ensemble5\.beams\[0\]' must be >= 1"),
    (("members: [reversed_1, reversed_2]", "members: [reversed_1, reversed_9]"),
     r"'systems\.ensemble2\.members\[1\]' names model 'reversed_9'"),
    (("  hidden_size: 384\n", "  hidden_size: -384\n"), r"'model\.hidden_size' must be >= 1"),
    (("reversed_1: {reverse_source: true,", "reversed_1: {reverse_source: 3,"),
     r"'models\.reversed_1\.reverse_source' must be true or false"),
])
def test_bad_params_name_the_key_and_file(tmp_path, edit, message):
    text = (ROOT / "profiles" / "default.yaml").read_text()
    assert edit[0] in text
    path = tmp_path / "params.yaml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigError, match=message) as err:
        config.load(path)
    assert str(path) in str(err.value)


def test_params_are_frozen():
    p = config.load(ROOT / "profiles" / "default.yaml")
    with pytest.raises(Exception):
        p.train.lr = 1.0  # type: ignore[misc]


def test_unknown_profile_is_refused(tmp_path, monkeypatch, capsys):
    from s2s import cli

    monkeypatch.chdir(ROOT)
    assert cli.main(["--params", str(tmp_path / "p.yaml"), "profile", "nope"]) == 1
    assert not (tmp_path / "p.yaml").exists()


def test_a_partial_resources_entry_takes_the_default_entry_field_by_field(tmp_path):
    """`resources.<kind>.gpus`, else `resources.default.gpus` (docs/gpu.md), for each field: a
    kind's entry that wrote only `threads` took StageResources' own defaults for the rest (a GPU
    job of the default asked for no GPU, 4000 MB and an hour)."""
    raw = config.resolved(ROOT / "profiles" / "smoke.yaml")
    raw["resources"] = {"default": {"threads": 4, "mem_mb": 64000, "runtime": 720, "gpus": 1},
                        "translate": {"threads": 8}, "train": {"gpus": 2, "runtime": 60}}
    path = tmp_path / "params.yaml"
    path.write_text(json.dumps(raw))
    p = config.load(path)
    res = config.StageResources
    assert p.resources_for("translate") == res(threads=8, mem_mb=64000, runtime=720, gpus=1)
    assert p.resources_for("train") == res(threads=4, mem_mb=64000, runtime=60, gpus=2)
    assert p.resources_for("report") == res(threads=4, mem_mb=64000, runtime=720, gpus=1)
    raw["resources"] = {"default": {"mem_mb": 500}, "translate": {"threads": 8}}
    path.write_text(json.dumps(raw))  # the default's unwritten fields: StageResources' own
    assert config.load(path).resources_for("translate") == res(threads=8, mem_mb=500)
    raw["resources"] = {"translate": {"threads": 8}}  # no default: StageResources' own
    path.write_text(json.dumps(raw))
    assert config.load(path).resources_for("translate") == res(threads=8)


def test_missing_section_is_named(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(textwrap.dedent("""\
        profile: x
        data: {train: [], dev: [], test: {corpus: a}}
    """))
    with pytest.raises(ConfigError, match="missing key 'prepare'"):
        config.load(path)


def test_a_misaligned_test_set_is_refused_before_a_training_corpus_is_read(tmp_path, monkeypatch):
    """prepare reads dev and test first: at the paper's scale the training corpora take most of
    an hour to read, and a fault of the test set was found only after them."""
    raw = tmp_path / "raw"
    for corpus, en, fr in (("multi30k.train", ["a cat"], ["un chat"]),
                           ("multi30k.val", ["x"], ["y"]),
                           ("multi30k.test_2016_flickr", ["x", "z"], ["y"])):
        (raw / corpus).mkdir(parents=True)
        (raw / corpus / "en.txt").write_text("".join(s + "\n" for s in en), encoding="utf-8")
        (raw / corpus / "fr.txt").write_text("".join(s + "\n" for s in fr), encoding="utf-8")
    read = []
    monkeypatch.setattr(prepare_stage, "iter_raw_pairs",
                        lambda raw_dir, ref, **kw: read.append(ref.corpus) or iter(()))
    data = DataConfig(train=(CorpusRef("multi30k.train"),), dev=(CorpusRef("multi30k.val"),),
                      test=CorpusRef("multi30k.test_2016_flickr"))
    with pytest.raises(CorpusError, match=r"test_2016_flickr/en\.txt has 2 lines, .*fr\.txt has 1"):
        prepare_stage.main(data, PrepareConfig(), PreparePaths(
            raw=raw, out=tmp_path / "prepared", metrics=tmp_path / "prepare.json"))
    assert read == [] and not (tmp_path / "prepared").exists()


def test_the_paper_sets_tokenized_by_lium_are_not_split_again():
    """The LIUM corpora (the paper profile's train, dev and test) come tokenized Moses-style: read
    as plain text, prepare's Moses pass split every elision again ("l' homme" into "l ' homme",
    "isn 't" into "isn ' t"), tokens the references then held and the paper's did not. They are
    read as the Europarl sample is (moses_escaped), and their tokens come through unchanged."""
    from s2s.data.sources import CORPORA
    from s2s.data.text import tokenize

    assert {CORPORA[c].format for c in ("lium.selected", "lium.ntst1213", "lium.ntst14")} == {
        "moses_escaped"}
    tokenized = {"fr": ["L' homme qu' il a vu aujourd' hui est là .",
                        "« C' est fini » , a-t-il dit ."],
                 "en": ["It 's the man he saw today .", "\" It isn 't over , \" he said ."]}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "raw" / "lium.ntst14"
        folder.mkdir(parents=True)
        for lang, lines in tokenized.items():
            (folder / f"{lang}.txt").write_text("".join(s + "\n" for s in lines),
                                                encoding="utf-8")
        en, fr = prepare.read_pair(Path(tmp) / "raw", CorpusRef("lium.ntst14"))
    for lang, raw in (("en", en), ("fr", fr)):
        assert [tokenize(normalize(s), lang) for s in raw] == tokenized[lang], raw
