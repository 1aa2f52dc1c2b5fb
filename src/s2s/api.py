"""Translate your own text, from Python or the command line (`s2s translate-text`, `s2s score`).

    >>> from s2s import api
    >>> tr = api.load("ensemble5")                 # a system of params.yaml, from the run's folders
    >>> tr = api.load("exports/ensemble5")         # or an exported folder (`s2s export`)
    >>> tr.translate(["A man is riding a bicycle."], beam=12)
    ['Un homme fait du vélo.']

The text goes through exactly what the test set went through in `prepare` (the same
:func:`s2s.data.text.normalize`, the profile's lowercasing, the same Moses tokenizer), is decoded
by the translate stage's own :func:`s2s.decode.translate.translate`, and comes back detokenised as
the translate stage writes ``beam<K>.detok.fr``. Models reverse the source themselves when they
were trained on reversed sources (``reverse_source`` in their checkpoint's config).

An export (:mod:`s2s.exporting`, written by the export stage) is one versioned folder per
system; :func:`load` checks every file against the sha256 that ``export.json`` records before it
decodes, so a checkpoint is never paired with another vocabulary. Either way, each checkpoint's
record of the text settings it was trained with is compared with how the input will be
prepared (the params' ``prepare``, or ``export.json``): a model is never fed text lowercased
when its training text was not (:func:`s2s.checkpoint.check_text`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from s2s.arch import feature_name
from s2s.config import PARAMS_FILE, Params, TranslateConfig
from s2s.config import load as load_params
from s2s.exporting import (EXPORT_FILE, SRC_LANG, TEXT_PIPELINE, TGT_LANG, ExportError,
                           file_sha256, package_version, read_record)
from s2s.layout import model_file, vocab_file
from s2s.text_settings import TEXT_KEYS, Expected, for_params

log = logging.getLogger("s2s.api")


class NotTrained(FileNotFoundError):
    """A system whose models or vocabularies the run has not made yet: says what to run."""

    def __str__(self) -> str:  # one line, without errno's decoration
        return self.args[0]


@dataclass
class Translator:
    """A loaded system: its model (one or an ensemble), vocabularies and text settings.

    Attributes:
        name: the system's name (``ensemble5``).
        model: the decodable model (a model or an :class:`~s2s.decode.ensemble.Ensemble`).
        src_vocab, tgt_vocab: the vocabularies the members were trained with.
        lowercase: ``prepare.lowercase`` of the run the models were trained on.
        cfg: the decoding settings (``translate`` of the params, or of the export).
        beams: the system's beam widths; the widest is the default beam.
        device: where the model runs.
        mm_dtype: bf16 where ``translate.amp`` asks for it on this device (``s2s.precision``),
            else None (fp32), exactly as the translate stage decodes.
    """

    name: str
    model: object
    src_vocab: object
    tgt_vocab: object
    lowercase: bool
    cfg: TranslateConfig
    beams: tuple[int, ...]
    device: object
    mm_dtype: object = None
    feature: str = "lstm"  # the n-best feature name: the kind of its models (s2s.arch)
    configs: tuple = ()  # its members' configs (s2s.arch), whose limits the input must keep

    def preprocess(self, sentences: list[str]) -> list[str]:
        """Raw sentences -> the Moses-tokenised text `prepare` would have written for them."""
        from s2s.data.text import normalize, tokenize_many

        lines = [normalize(s) for s in sentences]
        if self.lowercase:
            lines = [s.lower() for s in lines]
        return tokenize_many(lines, SRC_LANG)

    def translate_tokenized(self, tokenized: list[str], *, beam: int | None = None,
                            nbest: int = 1, batch_size: int | None = None,
                            desc: str = "", source: str = "input"
                            ) -> list[list[tuple[str, float]]]:
        """The n-best (tokenised hypothesis, log-probability) of every tokenised source line
        (`source`: where the lines came from, for an error naming one)."""
        from s2s.decode.translate import translate

        from s2s.decode.translate import check_lengths, check_search_size

        beam = max(self.beams) if beam is None else beam
        for name, value in (("beam", beam), ("nbest", nbest)) + (
                (("batch_size", batch_size),) if batch_size is not None else ()):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if nbest > beam:
            raise ValueError(f"nbest {nbest} is more than the beam {beam} keeps")
        cfg = self.cfg if batch_size is None else dataclasses.replace(self.cfg,
                                                                      batch_size=batch_size)
        check_search_size(beam=beam, batch_size=cfg.batch_size, vocab_size=len(self.tgt_vocab),
                          device=self.device, members=len(self.configs))
        # An empty line translates to an empty line (s2s.decode.translate), as in the stages.
        sources = [self.src_vocab.encode(t) for t in tokenized]
        check_lengths(sources, configs=self.configs, cfg=cfg, where=source)
        hyps = translate(self.model, sources, cfg=cfg, beam=beam, nbest=nbest,
                         vocab=self.tgt_vocab, device=self.device, desc=desc or self.name,
                         mm_dtype=self.mm_dtype)
        return [[(self.tgt_vocab.decode(h.tokens), float(h.score)) for h in hs] for hs in hyps]

    def translate(self, sentences: list[str], *, beam: int | None = None, nbest: int = 1,
                  batch_size: int | None = None, source: str = "input"
                  ) -> list[str] | list[list[tuple[str, float]]]:
        """Detokenised translations of raw sentences, in order.

        With ``nbest`` 1 (the default) a list of strings; with more, for every sentence a list of
        ``(translation, log-probability)``, best first as the search ranked them (the first is the
        1-best translation; under bf16 the log-probabilities are the fp32 model's, and a near-tie
        can show them out of order). ``beam`` defaults to the system's widest.
        """
        if isinstance(sentences, str):
            raise TypeError("translate() takes a list of sentences, not one string")
        from s2s.data.text import detokenize

        out = self.translate_tokenized(self.preprocess(list(sentences)), beam=beam, nbest=nbest,
                                       batch_size=batch_size, source=source)
        detok = [[(detokenize(h, TGT_LANG), s) for h, s in hs] for hs in out]
        return [hs[0][0] for hs in detok] if nbest == 1 else detok


def _device(name: str | None, cfg: TranslateConfig, source: str, gpus: int | None = None):
    """The device of --device `name`, else of `cfg` (`translate.device` of the file `source`: the
    params or an export's record); a CUDA one torch cannot see names the CPU as the other way.
    With `gpus` (a system of params: its `resources.translate.gpus`), `auto` is the translate
    stage's device, so that the text is decoded where the stage decodes (an export, which has
    no resources, takes CUDA where torch sees one)."""
    from s2s.device import NoCudaError, pick_device

    if name:
        return pick_device(name, key="--device")
    try:
        return pick_device(cfg.device, key=f"{source}: 'translate.device'", gpus=gpus,
                           gpus_key=f"{source}: 'resources.translate.gpus'")
    except NoCudaError as e:
        raise NoCudaError(f"{e}; or translate on the CPU: --device cpu") from None


def _mm_dtype(cfg: TranslateConfig, device):
    from s2s import precision

    return precision.choose(cfg.amp, device).dtype


def load(system: str | Path, *, params: Params | str | Path = PARAMS_FILE,
         models_dir: str | Path = "models", vocab_dir: str | Path = "data/vocab",
         device: str | None = None) -> Translator:
    """A :class:`Translator` for an export folder (one holding ``export.json``), or else for the
    system ``system`` of ``params`` from the pipeline's ``models_dir`` and ``vocab_dir``."""
    path = Path(system)
    if (path / EXPORT_FILE).is_file():
        return load_export(path, device=device)
    if path.is_dir() or "/" in str(system):
        raise ExportError(f"{path}: no {EXPORT_FILE} here: not an export folder (`s2s export` "
                          f"writes them), and not a system name")
    import torch

    from s2s import checkpoint
    from s2s.data.vocab import Vocab
    from s2s.decode.translate import load_members

    if not isinstance(params, Params):
        if not Path(params).is_file():
            raise ExportError(f"{system}: no export folder of that name here ({EXPORT_FILE}), "
                              f"and no {params} to find it as a system in")
        params = load_params(Path(params))
    if str(system) not in params.systems:
        raise KeyError(f"{params.source}: no system '{system}' under 'systems' "
                       f"(known: {', '.join(params.systems)})")
    sys_cfg, cfg = params.systems[str(system)], params.translate
    vocab_dir, models_dir = Path(vocab_dir), Path(models_dir)
    needed = (*(vocab_file(vocab_dir, lang) for lang in (SRC_LANG, TGT_LANG)),
              *(model_file(models_dir, m) for m in sys_cfg.members))
    for p in needed:
        if p.is_dir():  # not "missing": the user has something there to move
            kind = "vocabulary" if p.suffix == ".tsv" else "checkpoint"
            raise IsADirectoryError(f"{p}: a folder, not a {kind} file (system '{system}' reads "
                                    f"its {kind} there)")
    missing = [p for p in needed if not p.is_file()]
    if missing:
        raise NotTrained(f"system '{system}' is not trained here ({missing[0]} is missing): run "
                         f"`dvc repro translate-{system}` first (it trains what the system "
                         f"needs), or give --system an export folder")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dev = _device(device, cfg, str(params.source), params.resources_for("translate").gpus)
    src_vocab, tgt_vocab = Vocab.load_pair(vocab_dir)
    # Each member checked to be the model params describe (config, name, vocabularies) and to
    # have been trained on text prepared as params' `prepare` will prepare this input.
    configs = params.model_configs(sys_cfg.members)
    model = load_members(configs, models_dir=models_dir, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                         device=dev, combine=cfg.combine,
                         text=lambda m: for_params(params, m, checkpoint.CheckpointError))
    log.info("loaded system '%s' (%s) from %s and %s on %s", system, ", ".join(sys_cfg.members),
             models_dir, vocab_dir, dev)
    return Translator(str(system), model, src_vocab, tgt_vocab, params.prepare.lowercase, cfg,
                      tuple(sys_cfg.beams), dev, _mm_dtype(cfg, dev),
                      feature_name(configs.values()), tuple(configs.values()))


def load_export(folder: str | Path, *, device: str | None = None) -> Translator:
    """A :class:`Translator` from an export folder, after checking every file it lists against
    its sha256 and the text settings against each checkpoint's (s2s.checkpoint.check_text)."""
    import torch

    from s2s import checkpoint
    from s2s.data.vocab import Vocab
    from s2s.decode.ensemble import Ensemble

    folder = Path(folder)
    meta_path = folder / EXPORT_FILE
    meta = read_record(folder)
    for rel, digest in meta.files.items():
        p = folder / rel
        if not p.is_file():
            raise ExportError(f"{p}: listed in {meta_path} but missing")
        if file_sha256(p) != digest:
            raise ExportError(f"{p}: sha256 differs from the {digest[:12]} that {meta_path} "
                              f"records: the file was replaced or damaged")
    text = meta.text
    claimed = {k: getattr(text, k) for k in TEXT_KEYS}
    mine = next((k for k in TEXT_PIPELINE if claimed[k] != TEXT_PIPELINE[k]), None)
    if mine is not None:
        raise ExportError(f"{meta_path}: 'text.{mine}' is {claimed[mine]!r}, not this version's "
                          f"{TEXT_PIPELINE[mine]!r}: exported by another version, or edited")
    if text.sacremoses != package_version("sacremoses"):
        log.warning("%s: exported with sacremoses %s, running %s: tokenisation may differ",
                    meta_path, text.sacremoses, package_version("sacremoses"))
    # what each checkpoint was trained on must be what the export says (an edited record)
    trained_on = Expected(claimed, str(meta_path), "text.",
                          "the record was edited; export the system again", ExportError)
    cfg = meta.translate
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dev = _device(device, cfg, str(meta_path))
    src_vocab, tgt_vocab = Vocab.load_pair(folder)
    try:
        from s2s.arch import config_from_dict

        expect = {m: config_from_dict(meta.models[m], source=str(meta_path), key=f"models.{m}")
                  for m in meta.members}
    except ValueError as e:
        raise ExportError(f"{e} (a member's config in this version's terms)") from None
    models = []
    for m in meta.members:
        path = folder / "models" / f"{m}.pt"
        payload = checkpoint.load_payload(path)
        for side, lang, vocab in (("src", SRC_LANG, src_vocab), ("tgt", TGT_LANG, tgt_vocab)):
            trained = payload.get("vocab", {}).get(side)
            if trained != vocab.fingerprint:
                raise ExportError(f"{meta_path}: 'files.{lang}.tsv' is a vocabulary of "
                                  f"fingerprint {vocab.fingerprint[:12]}, but {path} was trained "
                                  f"with {str(trained)[:12]}: the export was edited; export the "
                                  f"system again")
        models.append(checkpoint.model_from_payload(
            path, payload, src_vocab=src_vocab, tgt_vocab=tgt_vocab, device=dev,
            expect=expect[m], name=m, text=trained_on,
            identity=(f"{meta_path} 'models.{m}'",
                      "the record was edited; export the system again")))
    model = models[0] if len(models) == 1 else Ensemble(models, combine=cfg.combine)
    log.info("loaded export '%s' (%s) from %s on %s", meta.system, ", ".join(meta.members),
             folder, dev)
    return Translator(meta.system, model, src_vocab, tgt_vocab, text.lowercase, cfg,
                      meta.beams, dev, _mm_dtype(cfg, dev),
                      feature_name(expect[m] for m in meta.members),
                      tuple(expect[m] for m in meta.members))
