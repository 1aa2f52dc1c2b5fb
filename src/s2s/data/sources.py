"""The corpus registry: where every corpus the pipeline can use comes from, and how to check it.

Pure data and small helpers; nothing here touches the disk or the network at import.

Each :class:`Corpus` knows two ways to get its English and French files:

- ``network``: the official archive or file (statmt.org, GitHub, manythings.org, LIUM), the member
  paths inside it, whether a member is gzipped, and the archive's checksum where one could be
  established from a public record (TFDS url_checksums and andhus/ml-tools for sha256; sacreBLEU,
  Sockeye autopilot and PaddlePaddle for md5). ``None`` where no download is known;
  ``network_note`` then says why. ``alternative`` says what to use where the source may be
  gone.
- ``mirror``: the two files in the local mirror (``S2S_MIRROR``, laid out as in its README.md), with
  their sha256, byte and line counts from that README, how many sentence pairs they hold, and how
  they relate to the network product (``identical``, ``head`` = its first lines, ``other``).

The download stage writes ``raw_dir/<corpus id>/{en,fr}.{txt,sgm}``; :func:`raw_pair` finds them.
Sentence pairs (``pairs``) differ from file lines only for ``sgm`` files, where a pair is a ``<seg>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Format = Literal["plain", "sgm", "moses_escaped"]
Relation = Literal["identical", "head", "other"]

FORMATS: tuple[str, ...] = ("plain", "sgm", "moses_escaped")


class SourceError(ValueError):
    """An unknown corpus id, or a corpus whose files are not where the registry says."""


@dataclass(frozen=True)
class Remote:
    """One file on the network, downloaded whole, and what is known to check it."""

    url: str
    sha256: str | None = None
    md5: str | None = None  # a weaker check, used only where no sha256 is known
    bytes: int | None = None
    checksum_from: str = ""  # the public record the checksum was taken from
    # The User-Agent to send, where the host refuses the project's own (s2s.data.http.USER_AGENT)
    user_agent: str | None = None


@dataclass(frozen=True)
class Part:
    """A piece of one side of a corpus: a file, or a member of an archive (tar or zip) at `remote`."""

    remote: Remote
    member: str | None = None  # path inside the archive; None: the downloaded file itself
    gunzip: bool = False  # the member (or file) is gzip-compressed
    column: int | None = None  # keep only this tab-separated column (0-based) of every line


@dataclass(frozen=True)
class NetworkSource:
    """Both sides of a corpus on the network; each side is its parts concatenated in order."""

    en: tuple[Part, ...]
    fr: tuple[Part, ...]

    @property
    def remotes(self) -> tuple[Remote, ...]:
        seen: dict[str, Remote] = {}
        for part in self.en + self.fr:
            seen.setdefault(part.remote.url, part.remote)
        return tuple(seen.values())


@dataclass(frozen=True)
class MirrorFile:
    """One file of the local mirror, as its README lists it."""

    path: str  # relative to the mirror root
    sha256: str
    lines: int
    bytes: int


@dataclass(frozen=True)
class MirrorSource:
    en: MirrorFile
    fr: MirrorFile
    pairs: int  # sentence pairs the mirror holds
    relation: Relation  # to the network product: byte-identical, its first `pairs` lines, or other


@dataclass(frozen=True)
class Corpus:
    id: str
    description: str
    format: Format  # of the files download writes
    pairs: int | None  # sentence pairs of the complete corpus (None: not established)
    network: NetworkSource | None
    mirror: MirrorSource | None
    network_note: str = ""  # caveats of the network source, or why there is none
    # what to use when the network source cannot be reached (a dead host): said in one line
    alternative: str = ""

    def mirror_shortfall(self, max_lines: int | None) -> str | None:
        """Why the mirror cannot serve `max_lines` pairs (None = all), or None if it can."""
        if self.mirror is None:
            return f"{self.id}: not in the mirror"
        held = self.mirror.pairs
        if max_lines is None:
            if self.mirror.relation == "head":
                total = f"{self.pairs:,}" if self.pairs is not None else "an unknown number of"
                return (f"{self.id}: the mirror holds the first {held:,} pairs; the profile asks "
                        f"for all {total} (set max_lines <= {held:,})")
            return None
        if max_lines > held:
            return (f"{self.id}: the mirror holds the first {held:,} pairs; the profile asks for "
                    f"{max_lines:,}")
        return None


@dataclass(frozen=True)
class RawPair:
    """Where the download stage put one corpus: its English and French files and their format."""

    en: Path
    fr: Path
    format: Format


# ---------------------------------------------------------------------------------------------
# Remotes

_STATMT = "https://www.statmt.org"
_TFDS = "tensorflow/datasets url_checksums (wmt14_translate.txt, wmt15_translate.txt)"
_SOCKEYE = "awslabs/sockeye sockeye_contrib/autopilot/models.py (md5)"

_EUROPARL = Remote(f"{_STATMT}/wmt13/training-parallel-europarl-v7.tgz",
                   sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
                   md5="c52404583294a1b609e56d45b2ed06f5", bytes=657_632_379, checksum_from=_TFDS)
_COMMONCRAWL = Remote(f"{_STATMT}/wmt13/training-parallel-commoncrawl.tgz",
                      sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
                      md5="7e0acbe86b0d7816300e14650f5b2bd4", bytes=918_311_367,
                      checksum_from=_TFDS)
_UN = Remote(f"{_STATMT}/wmt13/training-parallel-un.tgz",
             sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47",
             md5="bb25a213ba9140023e4cc82c778bef53", bytes=2_365_634_246, checksum_from=_TFDS)
_NC9 = Remote(f"{_STATMT}/wmt14/training-parallel-nc-v9.tgz",
              sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
              md5="92e42b68f9d3c2ae9722e6d1c2623e21", bytes=80_418_416, checksum_from=_TFDS)
_GIGA = Remote(f"{_STATMT}/wmt10/training-giga-fren.tar",
               sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a",
               md5="0b12e20027d5b5f0dfcca290c72c8953", bytes=2_595_102_720, checksum_from=_TFDS)
_DEV = Remote(f"{_STATMT}/wmt14/dev.tgz",
              sha256="cda0f85309e8ea4c9c2bc142cd795fb2771a5939ed5b4527b525dae05fa0c145",
              md5="88ba3fc60b2278d59277122e1c7dd6e7",
              checksum_from="andhus/ml-tools ml_tools/dataset/sets/wmt14.py (sha256); " + _SOCKEYE)
_TEST_FULL = Remote(f"{_STATMT}/wmt14/test-full.tgz", md5="a8cd784e006feb32ac6f3d9ec7eb389a",
                    checksum_from="sacrebleu dataset wmt14/full (md5)")
# manythings.org answers HTTP 406 to clients that do not look like a browser (as public
# downloaders of this file report): it gets a browser's User-Agent.
BROWSER_USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                      "Chrome/120.0.0.0 Safari/537.36")
_TATOEBA = Remote("https://www.manythings.org/anki/fra-eng.zip", user_agent=BROWSER_USER_AGENT)
_LIUM_DATA = "http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data"
_LIUM_BITEXTS = Remote(f"{_LIUM_DATA}/bitexts.tgz", md5="15861dbac4a52c8c75561d5027062d7d",
                       checksum_from="PaddlePaddle python/paddle/data/seqToseq.py (md5)")
_LIUM_DEVTEST = Remote(f"{_LIUM_DATA}/dev+test.tgz", md5="7d7897317ddd8ba0ae5c5fa7248d3ff5",
                       checksum_from="PaddlePaddle paddle/dataset/wmt14.py (md5)")

# Pinned to the commit the mirror was copied from, so the gunzipped files equal the mirror's.
_MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
_MULTI30K_RAW = (f"https://raw.githubusercontent.com/multi30k/dataset/{_MULTI30K_COMMIT}"
                 "/data/task1/raw")

_LIUM_NOTE = ("Schwenk's page (http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/, cited "
              "by the paper as [29]) was the only source, and the host appears gone (its site "
              "was restructured; no public mirror is known). The text is already tokenized by "
              "LIUM (Moses-style); whether it is XML-escaped is not established. prepare reads "
              "it as the Europarl sample (format moses_escaped: any XML escapes undone, then "
              "Moses-detokenised) and tokenises it as raw text, train, dev and test alike: a "
              "second Moses pass over tokenized text would split its apostrophes again "
              "(\"l' homme\" into \"l ' homme\"). The test set's detokenised text is then what "
              "sacreBLEU's 13a score reads: a reconstruction, not the official newstest2014 text "
              "(profile paper_statmt reads that).")
# The living alternative to the paper's data (profiles/paper_statmt.yaml).
_LIUM_ALTERNATIVE = ("Schwenk's LIUM host, the paper's only source of its 12M-pair selection, "
                     "appears gone and no public mirror is known: `s2s profile paper_statmt` "
                     "runs the paper's setting on the statmt.org WMT'14 corpora instead (those "
                     "of the wmt14 profile, whole; not the paper's selection)")


def _pair(en: MirrorFile, fr: MirrorFile, pairs: int, relation: Relation) -> MirrorSource:
    return MirrorSource(en=en, fr=fr, pairs=pairs, relation=relation)


def _members(remote: Remote, en: str, fr: str, *, gunzip: bool = False) -> NetworkSource:
    return NetworkSource(en=(Part(remote, en, gunzip),), fr=(Part(remote, fr, gunzip),))


# ---------------------------------------------------------------------------------------------
# Multi30k task 1 (image captions), raw

_MULTI30K_FILES = {
    # split: (pairs, (en bytes, en sha256), (fr bytes, fr sha256))
    "train": (29000,
              (1801238, "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6"),
              (2111303, "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d")),
    "val": (1014,
            (63297, "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227"),
            (73924, "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc")),
    "test_2016_flickr": (1000,
                         (62076, "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182"),
                         (72261, "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6")),
    "test_2017_flickr": (1000,
                         (55242, "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98"),
                         (65691, "6f3764e31dac41e9455e612958bcfd4e877c5e15cd66df2c2b2be6d9bd83e5b6")),
    "test_2017_mscoco": (461,
                         (24949, "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2"),
                         (29982, "39cde3f43f32b0a6bf29ce4917a46329ff32e53070c2fac87506695a740ae0a0")),
    "test_2018_flickr": (1071,
                         (70603, "4e585c2dd525911a6ea7730e9d0b516239af3f1b1ffae6a2130223cfb639f25e"),
                         (84076, "234b4a887da0da4801a3e2c6f21336231ff7dd46daeb80cfa1b551c8bbb78239")),
}


# The one .gz of the pinned commit whose checksum is published (sacreBLEU multi30k/2018).
_MULTI30K_MD5 = {"test_2018_flickr.fr": {
    "md5": "a64563e986438ed731a6713027c36bfd",
    "checksum_from": "sacrebleu dataset multi30k/2018 (md5)"}}


def _multi30k(split: str) -> Corpus:
    pairs, (en_bytes, en_sha), (fr_bytes, fr_sha) = _MULTI30K_FILES[split]
    folder = "multi30k-task1-enfr"
    return Corpus(
        id=f"multi30k.{split}",
        description=f"Multi30k task 1 {split} (Flickr30k/MSCOCO image captions), raw, "
                    f"{pairs:,} pairs",
        format="plain",
        pairs=pairs,
        network=NetworkSource(
            en=(Part(Remote(f"{_MULTI30K_RAW}/{split}.en.gz"), gunzip=True),),
            fr=(Part(Remote(f"{_MULTI30K_RAW}/{split}.fr.gz",
                            **_MULTI30K_MD5.get(f"{split}.fr", {})), gunzip=True),)),
        mirror=_pair(MirrorFile(f"{folder}/{split}.en", en_sha, pairs, en_bytes),
                     MirrorFile(f"{folder}/{split}.fr", fr_sha, pairs, fr_bytes),
                     pairs, "identical"),
        network_note=f"multi30k/dataset at commit {_MULTI30K_COMMIT}; the gunzipped files "
                     "are checked against the mirror's sha256 (of the .gz files only "
                     "test_2018_flickr.fr.gz has a published checksum, sacreBLEU's md5, also "
                     "checked)",
    )


# ---------------------------------------------------------------------------------------------
# WMT news dev/test sets (WMT14 dev.tgz, plain text)

_NEWSTEST_FILES = {
    # name in dev.tgz: (mirror folder, pairs, (en bytes, en sha256), (fr bytes, fr sha256))
    "news-test2008": ("wmt-newstest2008-2011-fren", 2051,
                      (263240, "134e1140848bb0d05e774dbe35b8b69602faf401250c03dbb437bdbe38c37b6f"),
                      (301220, "e212f59bb002d73a1bfebdcf101a6c51db3ccfd8a3115cc8a18414b6ee2a28f9")),
    "newssyscomb2009": ("wmt-newstest2008-2011-fren", 502,
                        (62557, "b734a44294fa3b23a2491cd9a2c59fb5eb71332ace70b2c9039978863dd0e43d"),
                        (70529, "bf74d7a28aa72aa79cbff02bec00a14983f65616dd37ee53e17a37e9d933505e")),
    "newstest2009": ("wmt-newstest2008-2011-fren", 2525,
                     (345562, "3fc92718e7b994ca0a5dc57e63b68d5c80244a56e5bb1cec11d2e8dd10b3ff3c"),
                     (391108, "2f4f17f73c3b927a3a0ba4cc082f22f70dd396d7d71cd14e160940207f5f6958")),
    "newstest2010": ("wmt-newstest2008-2011-fren", 2489,
                     (328648, "1ebece77e333965cbc66fde735a6f17e026b4d6690f4f7fdaba839b7bdadac3b"),
                     (383398, "131ee7deb0ea517bdd6a85ca5f6f5ca3136c5f76daba426ef4dde3d60b9e66a9")),
    "newstest2011": ("wmt-newstest2008-2011-fren", 3003,
                     (396884, "d387569743c0fa9097df4d4e2c1dd9e6ba9ef3cee6e0f473da3204c887dcf8fd"),
                     (456618, "9631ea545acf4b921add6baba856b03efae9f0de4c330a314091b3f925506c7f")),
    "newstest2012": ("wmt-newstest2012-2013-fren", 3003,
                     (381734, "f9e51f85c4948033fc7d77ef427f4d88908a8dd3f778970f62d0baafac3ff97e"),
                     (440985, "29aa5aff172127f6adf5625cc2f8e44f579d524700e84f1ec0eb14f4f19719e4")),
    "newstest2013": ("wmt-newstest2012-2013-fren", 3000,
                     (332974, "ace268a1d9724ca76f6d8e5c720ffdc08f01bdce45630ed8b269dc7918e1c16e"),
                     (393465, "909b63be5df3eb8c13e1d5967bf3f0adfdb9f6ed5e638c5bffff563ee2ff7f41")),
}


def _newstest(name: str) -> Corpus:
    folder, pairs, (en_bytes, en_sha), (fr_bytes, fr_sha) = _NEWSTEST_FILES[name]
    return Corpus(
        id=f"wmt.{name.replace('-', '')}",
        description=f"WMT {name} fr-en news (official plain text of WMT14 dev.tgz, not "
                    f"whitespace-normalised), {pairs:,} pairs",
        format="plain",
        pairs=pairs,
        network=_members(_DEV, f"dev/{name}.en", f"dev/{name}.fr"),
        mirror=_pair(MirrorFile(f"{folder}/{name}.en", en_sha, pairs, en_bytes),
                     MirrorFile(f"{folder}/{name}.fr", fr_sha, pairs, fr_bytes),
                     pairs, "identical"),
        network_note="dev.tgz checked by its published sha256; the extracted files against "
                     "the mirror's sha256",
    )


# ---------------------------------------------------------------------------------------------
# The registry

_ENTRIES: tuple[Corpus, ...] = (
    *(_multi30k(s) for s in _MULTI30K_FILES),
    Corpus(
        id="wmt14.europarl_v7",
        description="Europarl v7 fr-en (WMT14 training), raw",
        format="plain",
        pairs=2_007_723,
        network=_members(_EUROPARL, "training/europarl-v7.fr-en.en",
                         "training/europarl-v7.fr-en.fr"),
        mirror=_pair(
            MirrorFile("wmt14-train-europarl-v7-head3k/europarl-v7.fr-en.head3000.en",
                       "177e6528d78227fea11c5a045b1afb20c3dc6e21536a4d4d51bd84ec2aafe8fa",
                       3000, 461577),
            MirrorFile("wmt14-train-europarl-v7-head3k/europarl-v7.fr-en.head3000.fr",
                       "dbbee85fabb01eeff757c060c2f515ac55bb737e81dbebe3922fa7f54d676774",
                       3000, 520094),
            3000, "head"),
    ),
    Corpus(
        id="wmt14.commoncrawl",
        description="Common Crawl fr-en (WMT13 release, WMT14 training), raw",
        format="plain",
        pairs=3_244_152,
        network=_members(_COMMONCRAWL, "commoncrawl.fr-en.en", "commoncrawl.fr-en.fr"),
        mirror=None,
    ),
    Corpus(
        id="wmt14.un",
        description="UN corpus fr-en, undoc.2000 (WMT13 release, WMT14 training), raw",
        format="plain",
        pairs=12_886_831,
        network=_members(_UN, "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr"),
        mirror=None,
    ),
    Corpus(
        id="wmt14.news_commentary_v9",
        description="News Commentary v9 fr-en (WMT14 training), raw",
        format="plain",
        pairs=183_251,
        network=_members(_NC9, "training/news-commentary-v9.fr-en.en",
                         "training/news-commentary-v9.fr-en.fr"),
        mirror=None,
    ),
    Corpus(
        id="wmt14.giga_fren",
        description="10^9 French-English corpus giga-fren.release2.fixed (WMT10 release, WMT14 "
                    "training), raw, web-crawled Canadian government text",
        format="plain",
        pairs=22_520_376,
        network=_members(_GIGA, "giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz",
                         gunzip=True),
        mirror=_pair(
            MirrorFile("wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000.en",
                       "747fd3ed5da17a7cad29b699b253f7ed7a875de32298a1001cb4397428790ce9",
                       30000, 3651325),
            MirrorFile("wmt14-train-gigafren-head30k/giga-fren.release2.fixed.head30000.fr",
                       "97a7655d16809b8dad6e9fa57880406e222c373c3d31121f58ae0f6835494de7",
                       30000, 4530536),
            30000, "head"),
    ),
    Corpus(
        id="wmt14.europarl_v7_sample20k_tok",
        description="A 20,000-pair sample (not a head) of Europarl v7 fr-en, Moses-tokenised and "
                    "XML-escaped (&apos; &quot; &amp;), original casing",
        format="moses_escaped",
        pairs=20000,
        network=None,
        network_note="no network source: this sample comes from a course assignment's "
                     "repository (peesusanthosh/DirectMachineTranslator-IBMModel1) and exists "
                     "here only in the mirror (set S2S_MIRROR)",
        mirror=_pair(
            MirrorFile("wmt14-train-europarl-v7-sample20k-tok/europarl-v7.fr-en.sample20k.tok.en",
                       "bb0cef82b9508656b825801b692841b0d70bb726b39bf3e00bfab64ce262a8fa",
                       20000, 1988300),
            MirrorFile("wmt14-train-europarl-v7-sample20k-tok/europarl-v7.fr-en.sample20k.tok.fr",
                       "151532eeb2fc8f13945a9d9f271b37c7aa6043dc26fcb226656f6a01080365f5",
                       20000, 2375492),
            20000, "other"),
    ),
    *(_newstest(n) for n in _NEWSTEST_FILES),
    Corpus(
        id="wmt14.newstest2014",
        description="WMT14 newstest2014 fr-en, full version (test-full.tgz), the paper's test set "
                    "ntst14: English source and French reference SGML, 3,003 segments",
        format="sgm",
        pairs=3003,
        network=_members(_TEST_FULL, "test-full/newstest2014-fren-src.en.sgm",
                         "test-full/newstest2014-fren-ref.fr.sgm"),
        mirror=_pair(
            MirrorFile("wmt14-newstest2014-fren/sgm/newstest2014-fren-src.en.sgm",
                       "5521ed9b1d07763c7e8d7ddfc0fda269cd114612a6283bd3836979ea4dd10a26",
                       3357, 441845),
            MirrorFile("wmt14-newstest2014-fren/sgm/newstest2014-fren-ref.fr.sgm",
                       "c57025c8a338c642fe3ad0206ddc75d258a5584e1d470b75f37af2fb666d7e93",
                       3357, 514587),
            3003, "identical"),
        network_note="md5 of test-full.tgz only (sacreBLEU's record); the extracted SGML is "
                     "checked against the mirror's sha256",
    ),
    Corpus(
        id="tatoeba.fra_eng",
        description="Tatoeba English-French pairs as packaged by manythings.org/anki (fra.txt: "
                    "English TAB French [TAB attribution])",
        format="plain",
        pairs=None,
        network=NetworkSource(en=(Part(_TATOEBA, "fra.txt", column=0),),
                              fr=(Part(_TATOEBA, "fra.txt", column=1),)),
        network_note="manythings.org serves the current release, which grows over time and "
                     "differs from the mirror's 2017-09-29 snapshot; no checksum is known. The "
                     "site refuses clients that do not look like a browser (HTTP 406), so it "
                     "gets a browser's User-Agent",
        alternative="The local mirror's 2017-09-29 snapshot can stand in (set S2S_MIRROR): "
                    "an older, smaller release",
        mirror=_pair(
            MirrorFile("tatoeba-anki-fra-eng-2017-09-29/fra-eng.en",
                       "6ae4758352bf05234051d7da88d4faf113449ef5ded247aa21f777371ebb0fca",
                       142787, 4520730),
            MirrorFile("tatoeba-anki-fra-eng-2017-09-29/fra-eng.fr",
                       "a94e9fd9c486e55a8242948727964b80ae0ea3d573cd35dd460cb489681e0681",
                       142787, 5488785),
            142787, "other"),
    ),
    Corpus(
        id="lium.selected",
        description="The paper's training set: Schwenk's 12M-pair 'selected' subset of WMT14 "
                    "en-fr (bitexts.selected: ccb2_pc30, crawl, dev08_11, ep7_pc45, nc9, "
                    "un2000_pc34, concatenated in that order), tokenized",
        format="moses_escaped",
        pairs=None,
        network=NetworkSource(
            en=tuple(Part(_LIUM_BITEXTS, f"bitexts.selected/{n}.en.gz", gunzip=True)
                     for n in ("ccb2_pc30", "crawl", "dev08_11", "ep7_pc45", "nc9", "un2000_pc34")),
            fr=tuple(Part(_LIUM_BITEXTS, f"bitexts.selected/{n}.fr.gz", gunzip=True)
                     for n in ("ccb2_pc30", "crawl", "dev08_11", "ep7_pc45", "nc9", "un2000_pc34"))),
        network_note=_LIUM_NOTE + " bitexts.tgz (about 1.3 GB) is checked by PaddlePaddle's "
                                  "md5.",
        alternative=_LIUM_ALTERNATIVE,
        mirror=None,
    ),
    Corpus(
        id="lium.ntst1213",
        description="The paper's dev set ntst1213 (newstest2012 + newstest2013) as distributed "
                    "by LIUM, tokenized, 6,003 pairs",
        format="moses_escaped",
        pairs=6003,
        network=_members(_LIUM_DEVTEST, "dev/ntst1213.en", "dev/ntst1213.fr"),
        network_note=_LIUM_NOTE,
        alternative=_LIUM_ALTERNATIVE,
        mirror=None,
    ),
    Corpus(
        id="lium.ntst14",
        description="The paper's test set ntst14 (newstest2014) as distributed by LIUM, "
                    "tokenized, 3,003 pairs",
        format="moses_escaped",
        pairs=3003,
        network=_members(_LIUM_DEVTEST, "dev/ntst14.en", "dev/ntst14.fr"),
        network_note=_LIUM_NOTE,
        alternative=_LIUM_ALTERNATIVE,
        mirror=None,
    ),
    Corpus(
        id="lium.nbest_ntst14",
        description="The 1000-best lists of Schwenk's baseline SMT system on ntst14, which the "
                    "paper rescored (Table 2)",
        format="plain",
        pairs=None,
        network=None,
        network_note="no download is known: the paper took these lists from Schwenk's page "
                     "(http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/), but no URL "
                     "of them could be established and no public copy is known; they are not in "
                     "the mirror either. Set data.nbest to null so that the pipeline rescores "
                     "n-best lists of its own baseline (rescore.baseline)",
        mirror=None,
    ),
)

CORPORA: dict[str, Corpus] = {c.id: c for c in _ENTRIES}


# ---------------------------------------------------------------------------------------------
# Helpers


def corpus(corpus_id: str) -> Corpus:
    """The registry entry of `corpus_id`; SourceError listing the known ids if there is none."""
    try:
        return CORPORA[corpus_id]
    except KeyError:
        raise SourceError(f"unknown corpus '{corpus_id}' (known: {', '.join(CORPORA)})") from None


def raw_names(corpus_id: str) -> tuple[str, str]:
    """File names of the English and French files inside ``raw_dir/<corpus_id>/``."""
    ext = "sgm" if corpus(corpus_id).format == "sgm" else "txt"
    return f"en.{ext}", f"fr.{ext}"


def raw_pair(raw_dir: Path, corpus_id: str) -> RawPair:
    """Where the download stage put `corpus_id`: ``raw_dir/<corpus_id>/{en,fr}.{txt,sgm}``.

    Raises SourceError for an unknown id and FileNotFoundError, naming the file, if the corpus
    has not been downloaded (a corpus directory exists only once all its files are complete).
    """
    entry = corpus(corpus_id)
    en_name, fr_name = raw_names(corpus_id)
    folder = Path(raw_dir) / corpus_id
    pair = RawPair(en=folder / en_name, fr=folder / fr_name, format=entry.format)
    for path in (pair.en, pair.fr):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: not found; corpus '{corpus_id}' has not been downloaded into "
                f"{raw_dir} (run the download stage with parameters that name it)")
    return pair
