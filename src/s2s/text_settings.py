"""How raw text becomes a model's input: the record a checkpoint and an export carry.

:data:`TEXT_PIPELINE` names what `prepare` does to text (:mod:`s2s.data.text`: normalisation,
the Moses tokenizer) and what the translate stage does to its output; ``lowercase`` is the run's
``prepare.lowercase``. The trainer records :func:`text_record` of its params in every checkpoint
(``s2s.checkpoint.save(..., text=...)``), the export stage writes the same record into
``export.json``, and loading an export refuses one whose record differs from its checkpoints'
(:func:`first_difference`), so a model is never fed text prepared another way than its
training text. No torch here: the export stage imports this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SRC_LANG, TGT_LANG = "en", "fr"
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
