"""Load evaluation data from the files the papers ship, as :class:`Sample` records.

Containers come from the extension: ``.jsonl`` (one record a line, streamed), ``.json`` (an
array, one object, or JSON lines after all), ``.parquet``. Record formats come from the first
record's keys unless named:

==========  =================================================================================
canonical   ``{id, question, context, answers, meta}`` (what :func:`save_samples` writes)
memagent    ``{input|question, context, answers}`` (MemAgent's eval files)
ruler       ``{input, outputs, [context], [index], [length]}`` (RULER's generated JSONL)
memreread   ``{question, context|documents, answer|answers}`` (MemReread-style QA)
hotpotqa    official HotpotQA / 2WikiMultihopQA: ``{_id, question, answer, context:
            [[title, [sentences]]], supporting_facts, type, level}``
==========  =================================================================================

A record missing a required field stops the load with ``FILE:LINE: record has no ...``
(``FILE[i]`` for the i-th element of a JSON array): nothing is silently skipped.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .hotpotqa import (
    Paragraph,
    paragraphs_from_context,
    render_documents,
    supporting_facts,
    supporting_sentences,
)
from .records import Sample

FORMATS = ("canonical", "memagent", "ruler", "memreread", "hotpotqa")
_CANONICAL = {"id", "question", "context", "answers"}
PARQUET_SUFFIXES = (".parquet", ".pq")
DATA_SUFFIXES = (".jsonl", ".json", *PARQUET_SUFFIXES)  # the files load_samples reads
# RULER writes <save_dir>/<task>/<subset>.jsonl; a folder with one of these names is the task.
_RULER_TASK_DIRS = {
    *(f"niah_single_{i}" for i in range(1, 5)),
    *(f"niah_multikey_{i}" for i in range(1, 5)),
    *("niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2"),
}

Record = tuple[str, Any]  # (where, value): "file.jsonl:7" or "file.json[3]", and the record


def load_samples(path: str | Path, format: str = "auto") -> list[Sample]:
    """Every record of ``path`` as a Sample (see the module doc for formats)."""
    return list(iter_samples(path, format))


def iter_samples(path: str | Path, format: str = "auto") -> Iterator[Sample]:
    """Samples one at a time, so a multi-gigabyte JSONL file is never held whole. Ids must
    be unique (results are stored by id); records without one get ``<file stem>-<i>``."""
    path = Path(path)
    if format != "auto" and format not in FORMATS:
        raise UsageError(f"unknown data format {format!r}; expected auto or {', '.join(FORMATS)}")
    if not path.is_file():
        raise UsageError(f"{path}: no such data file")
    records = _records(path)
    first = next(records, None)
    if first is None:
        raise UsageError(f"{path}: holds no records")
    fmt = detect_format(*first) if format == "auto" else format
    parse = _PARSERS[fmt]
    seen: dict[str, str] = {}
    for i, (where, record) in enumerate(itertools.chain([first], records)):
        if not isinstance(record, Mapping):
            raise UsageError(f"{where}: record is a {type(record).__name__}, not an object")
        sample = parse(record, where, f"{path.stem}-{i}", path)
        if sample.id in seen:
            raise UsageError(f"{where}: id {sample.id!r} was already used at {seen[sample.id]}")
        seen[sample.id] = where
        yield sample


def detect_format(where: str, record: Any) -> str:
    """The record format a record's keys show (UsageError when they fit none)."""
    if not isinstance(record, Mapping):
        raise UsageError(f"{where}: record is a {type(record).__name__}, not an object")
    keys = set(record)
    if "outputs" in keys and "input" in keys:
        return "ruler"
    if "supporting_facts" in keys or ("_id" in keys and "answer" in keys):
        return "hotpotqa"
    # A meta object marks the canonical format, whatever other keys ride along.
    if keys >= _CANONICAL and (keys == _CANONICAL or "meta" in keys):
        return "canonical"
    answers = keys & {"answers", "answer"}
    if "context" in keys and answers and ("input" in keys or keys >= {"question", "answers"}):
        return "memagent"
    if "question" in keys and keys & {"context", "documents"} and answers:
        return "memreread"
    raise UsageError(
        f"{where}: cannot tell the data format from keys {sorted(keys)}; "
        f"pass one of {', '.join(FORMATS)}"
    )


def save_samples(samples: Iterable[Sample], path: str | Path) -> int:
    """Write canonical JSONL (one ``Sample.to_dict()`` a line); returns how many. The file
    appears whole or not at all: it is written beside and renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    count = 0
    with partial.open("w", encoding="utf-8") as f:
        for sample in samples:
            f.write(json.dumps(sample.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    os.replace(partial, path)
    return count


# --- containers -------------------------------------------------------------------------


def _records(path: Path) -> Iterator[Record]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_records(path)
    if suffix == ".json":
        return _json_records(path)
    if suffix in PARQUET_SUFFIXES:
        return _parquet_records(path)
    raise UsageError(f"{path}: unknown data file type {suffix!r}; use .jsonl, .json or .parquet")


def _jsonl_records(path: Path) -> Iterator[Record]:
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield f"{path}:{number}", _json(line, f"{path}:{number}")


def _json_records(path: Path) -> Iterator[Record]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":  # several objects: JSON lines under a .json name
            raise UsageError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        yield from _jsonl_records(path)
        return
    if isinstance(data, list):
        yield from ((f"{path}[{i}]", record) for i, record in enumerate(data))
    else:
        yield f"{path}[0]", data


def _json(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None


def _parquet_records(path: Path) -> Iterator[Record]:
    try:
        import pyarrow.parquet as pq  # optional: only Parquet files need it
    except ImportError:
        raise UsageError("reading Parquet needs pyarrow: pip install pyarrow") from None
    row = 0
    for batch in pq.ParquetFile(path).iter_batches():
        for record in batch.to_pylist():
            yield f"{path}[row {row}]", record
            row += 1


# --- record formats ---------------------------------------------------------------------


def _field(record: Mapping[str, Any], where: str, *names: str) -> Any:
    """The first of ``names`` present; a record with none of them is rejected."""
    for name in names:
        if name in record and record[name] is not None:
            return record[name]
    wanted = " or ".join(repr(n) for n in names)
    raise UsageError(f"{where}: record has no {wanted}")


def _text(value: Any, where: str, name: str, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{where}: {name!r} is a {type(value).__name__}, not text")
    if not empty_ok and not value.strip():
        raise UsageError(f"{where}: {name!r} is empty")
    return value


def _answers(value: Any, where: str) -> list[str]:
    """Gold answers as a list of strings: one string or number is one answer."""
    items = value if isinstance(value, list | tuple) else [value]
    if not items:
        raise UsageError(f"{where}: record has no gold answers (empty list)")
    if not all(isinstance(a, str | int | float) and not isinstance(a, bool) for a in items):
        raise UsageError(f"{where}: answers must be strings, got {value!r:.80}")
    return [str(a) for a in items]


def _rest(record: Mapping[str, Any], used: set[str]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in used}


def _canonical(record: Mapping[str, Any], where: str, default_id: str, path: Path) -> Sample:
    for name in ("id", "question", "context", "answers"):
        _field(record, where, name)
    meta = record.get("meta") or {}
    if not isinstance(meta, Mapping):
        raise UsageError(f"{where}: 'meta' is a {type(meta).__name__}, not an object")
    # Other top-level keys are kept in meta (meta's own entries win), never dropped.
    extra = _rest(record, _CANONICAL | {"meta"})
    return Sample(
        id=str(record["id"]),
        question=_text(record["question"], where, "question"),
        context=_text(record["context"], where, "context", empty_ok=True),
        answers=_answers(record["answers"], where),
        meta={**extra, **meta},
    )


def _memagent(record: Mapping[str, Any], where: str, default_id: str, path: Path) -> Sample:
    question = _text(_field(record, where, "question", "input"), where, "question")
    context = _text(_field(record, where, "context"), where, "context", empty_ok=True)
    answers = _answers(_field(record, where, "answers", "answer"), where)
    used = {"question", "input", "context", "answers", "answer", "id", "_id"}
    meta = {"kind": "qa", **_rest(record, used), "source_format": "memagent"}
    return Sample(_id(record, default_id), question, context, answers, meta)


def _ruler(record: Mapping[str, Any], where: str, default_id: str, path: Path) -> Sample:
    prompt = _text(_field(record, where, "input"), where, "input")
    answers = _answers(_field(record, where, "outputs"), where)
    meta: dict[str, Any] = {"dataset": "ruler", "kind": "ruler", "source_format": "ruler"}
    if path.parent.name in _RULER_TASK_DIRS:
        meta["task"] = path.parent.name
        meta["kind"] = "qa" if path.parent.name.startswith("qa") else "ruler"
    meta.update(_rest(record, {"input", "outputs", "context", "id"}))
    target = _ruler_target_length(path)
    if target is not None:
        # RULER's own ``length`` is each sample's token count, which would scatter a report
        # into one row per sample; the set's target length is the folder it was written to.
        if "length" in meta:
            meta["tokens"] = meta["length"]
        meta["length"] = target
    if record.get("context") is not None:
        context, question = _text(record["context"], where, "context", empty_ok=True), prompt
    else:
        # RULER's prompts end with the query on their last line; what comes before (the
        # instructions and the haystack) is the document.
        context, _, question = prompt.rstrip().rpartition("\n")
        meta["question_split"] = "last_line"
    sample_id = str(record.get("id", record.get("index", default_id)))
    if "task" in meta and "id" not in record:  # RULER's indexes restart in every file
        length = f"{target}-" if target is not None else ""
        sample_id = f"{meta['task']}-{length}{sample_id}"
    return Sample(sample_id, _text(question, where, "input"), context, answers, meta)


def _ruler_target_length(path: Path) -> int | None:
    """The length of RULER's ``<length>/data/<task>/validation.jsonl`` layout, if it is one."""
    parents = path.resolve().parents
    if len(parents) > 2 and parents[1].name == "data" and parents[2].name.isdigit():
        return int(parents[2].name)
    return None


def _memreread(record: Mapping[str, Any], where: str, default_id: str, path: Path) -> Sample:
    question = _text(_field(record, where, "question", "input"), where, "question")
    raw = _field(record, where, "context", "documents")
    context = raw if isinstance(raw, str) else _documents(raw, where)
    answers = _answers(_field(record, where, "answers", "answer"), where)
    used = {"question", "input", "context", "documents", "answers", "answer", "id", "_id"}
    meta = {"kind": "qa", **_rest(record, used), "source_format": "memreread"}
    return Sample(_id(record, default_id), question, context, answers, meta)


def _documents(documents: Any, where: str) -> str:
    """A document list as ``Document i:`` blocks: strings, ``[title, text|sentences]`` pairs,
    or objects with ``title`` and ``text`` (or ``paragraph_text``/``contents``)."""
    if not isinstance(documents, list):
        raise UsageError(f"{where}: 'documents' is a {type(documents).__name__}, not a list")
    blocks = []
    for i, doc in enumerate(documents, 1):
        if isinstance(doc, str):
            blocks.append(f"Document {i}:\n{doc}")
        elif isinstance(doc, Mapping):
            text = _field(doc, f"{where} document {i}", "text", "paragraph_text", "contents")
            blocks.append(Paragraph(str(doc.get("title", "")), str(text)).render(i))
        else:
            blocks.append(paragraphs_from_context([doc], f"{where} document {i}")[0].render(i))
    return "\n\n".join(blocks)


def _hotpotqa(record: Mapping[str, Any], where: str, default_id: str, path: Path) -> Sample:
    question = _text(_field(record, where, "question"), where, "question")
    answers = _answers(_field(record, where, "answer"), where)
    context = _field(record, where, "context")
    paragraphs = paragraphs_from_context(context, where)
    facts = supporting_facts(record.get("supporting_facts"))
    meta = {
        "dataset": "hotpotqa",
        "kind": "qa",
        "docs": len(paragraphs),
        "supporting_facts": facts,
        "evidence": supporting_sentences(context, facts),
        **{k: record[k] for k in ("type", "level") if k in record},
    }
    return Sample(_id(record, default_id), question, render_documents(paragraphs), answers, meta)


def _id(record: Mapping[str, Any], default: str) -> str:
    for name in ("id", "_id"):
        if record.get(name) is not None:
            return str(record[name])
    return default


_PARSERS: dict[str, Callable[[Mapping[str, Any], str, str, Path], Sample]] = {
    "canonical": _canonical,
    "memagent": _memagent,
    "ruler": _ruler,
    "memreread": _memreread,
    "hotpotqa": _hotpotqa,
}


def load_files(files: Iterable[str | Path]) -> list[Sample]:
    """The samples of every file in ``files``, in order (e.g. ``data_files(folder)``)."""
    return [sample for path in files for sample in load_samples(path)]


def data_files(folder: str | Path) -> list[Path]:
    """Every data file (.jsonl, .json, .parquet) in ``folder`` and its subfolders, hidden ones
    left out, sorted by path (RULER writes ``<length>/data/<task>/validation.jsonl``)."""
    folder = Path(folder)
    files = sorted(
        path
        for path in folder.rglob("*")
        if path.suffix.lower() in DATA_SUFFIXES
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )
    if not files:
        raise UsageError(f"{folder} holds no data files ({', '.join(DATA_SUFFIXES)})")
    return files
