"""How raw text becomes a model's input: the record a checkpoint and an export carry.

:data:`TEXT_PIPELINE` names what `prepare` does to text (:mod:`s2s.data.text`: normalisation,
the Moses tokenizer) and what the translate stage does to its output; ``lowercase`` is the run's
``prepare.lowercase``. The trainer records :func:`text_record` of its params in every checkpoint
(``s2s.checkpoint.save(..., text=...)``), the export stage writes the same record into
``export.json``, and loading an export refuses one whose record differs from its checkpoints'
(:func:`first_difference`), so a model is never fed text prepared another way than its
training text. Every load of a trained system compares them: by name (:func:`s2s.api.load`: the
params' ``prepare`` section, which is how its input will be prepared) and from an export folder
(its ``export.json``), both through :func:`s2s.checkpoint.model_from_payload` with an
:class:`Expected`. No torch here: the export stage imports this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from s2s.layout import SRC_LANG, TGT_LANG

# These strings are recorded in exports and compared when one is loaded: they stay as they are.
# "control characters dropped" is shorthand: the C0 controls but whitespace, DEL, U+200B and
# U+FEFF are; the C1 controls (U+0080-U+009F) are kept, as sacreBLEU keeps them (U+0085 becomes
# a space, as every Unicode space does).
TEXT_PIPELINE = {
    "normalize": "s2s.data.text.normalize: NFC, control characters dropped, Unicode spaces -> ' '",
    "tokenizer": "sacremoses MosesTokenizer(lang).tokenize(escape=False, "
                 "aggressive_dash_splits=False)",
    "detokenizer": "sacremoses MosesDetokenizer(lang).detokenize(line.split())",
    "src_lang": SRC_LANG,
    "tgt_lang": TGT_LANG,
}
TEXT_KEYS = (*TEXT_PIPELINE, "lowercase")


def text_record(prepare) -> dict[str, Any]:
    """The text settings a model trained on `prepare`'s output was trained with (`prepare`: the
    params' ``prepare`` section, or a stage's view of it declaring ``prepare.lowercase``)."""
    return {**TEXT_PIPELINE, "lowercase": bool(prepare.lowercase)}


@dataclass(frozen=True)
class Expected:
    """The text settings a loaded model's input will be prepared with, and who says so: what a
    checkpoint's record is compared with (s2s.checkpoint.check_text).

    `record`: :func:`text_record`; `source`: the file that sets them (params.yaml, an
    export.json), named with `prefix` + the key ("prepare." for params, "text." for an export);
    `fix`: what to do about a difference; `error`: the exception a difference raises."""

    record: Mapping[str, Any]
    source: str
    prefix: str
    fix: str
    error: type[Exception] = ValueError


def for_params(params, name: str, error: type[Exception] = ValueError) -> Expected:
    """What model `name` of `params` is fed by name (s2s.api.load): params' ``prepare``."""
    return Expected(text_record(params.prepare), str(params.source), "prepare.",
                    f"set it back, or retrain the model with it (`dvc repro train-{name}`)", error)


def check_record(text: Any) -> dict[str, Any]:
    """`text` as a checkpoint stores it: exactly :data:`TEXT_KEYS`, strings and a boolean;
    ValueError naming the key otherwise."""
    if not isinstance(text, Mapping) or set(text) != set(TEXT_KEYS):
        got = sorted(text) if isinstance(text, Mapping) else type(text).__name__
        raise ValueError(f"a text record has the keys {list(TEXT_KEYS)}, got {got}")
    for key in TEXT_KEYS:
        want = bool if key == "lowercase" else str
        if not isinstance(text[key], want):
            raise ValueError(f"text record: '{key}' must be a {want.__name__}, got "
                             f"{text[key]!r}")
    return dict(text)


def first_difference(recorded: Mapping, claimed: Mapping) -> str | None:
    """The first key of :data:`TEXT_KEYS` whose value differs between two records, or None."""
    for key in TEXT_KEYS:
        if recorded.get(key) != claimed.get(key):
            return key
    return None


def cased(words) -> bool:
    """Whether a vocabulary has a word with a capital letter: a vocabulary built from
    lowercased text has none, one built from cased text (any sentence-initial capital) has."""
    return any(w != w.lower() for w in words)
