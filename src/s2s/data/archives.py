"""Safe extraction of the members a corpus needs from a tar or zip archive.

Tar members are checked by the standard library's ``data`` extraction filter
(:func:`tarfile.data_filter`, PEP 706): a member that would land outside the target folder, a
link pointing outside it or to an absolute path, and a device or fifo are refused. Zip has no
such filter; a zip member with an absolute path or one that climbs out is refused by a check of
our own. Links are never created, whatever the archive, and a link asked for as a corpus file is
refused. A refusal is an :class:`UnsafeArchiveError` naming the archive and the member, raised
before anything of that member is written.
"""

from __future__ import annotations

import stat
import tarfile
import zipfile
from collections.abc import Collection
from pathlib import Path, PurePosixPath, PureWindowsPath

from s2s.data.files import DownloadError, copy_with_progress
from s2s.io import atomic_open


class UnsafeArchiveError(DownloadError):
    """An archive member that would be written outside the target directory, or is not a file."""


class MissingMemberError(DownloadError):
    """An archive without a member the registry names: a wrong file where the archive has no
    checksum, a registry that is wrong where it has one."""


class NotAnArchiveError(DownloadError):
    """A file read as an archive that is neither a tar nor a zip: a zip cut short (its directory
    is at the end), a tar cut inside its first header, or a page served in place of the file."""


def safe_extract(archive: Path, dest: Path, members: Collection[str] | None = None
                 ) -> dict[str, Path]:
    """Extract `members` (None: every regular file) of a tar or zip `archive` under `dest`.

    Every member read is checked first (a tar is read only until the last member asked for; a
    zip's members are all checked before any is written); one unsafe member refuses the whole
    archive (UnsafeArchiveError). Each file is written under a temporary name and renamed. A
    named member the archive lacks is a DownloadError. Returns member name -> extracted path.
    """
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    wanted = None if members is None else set(members)
    if zipfile.is_zipfile(archive):
        got = _extract_zip(archive, dest, wanted)
    elif tarfile.is_tarfile(archive):
        got = _extract_tar(archive, dest, wanted)
    else:
        raise NotAnArchiveError(f"{archive}: neither a tar nor a zip archive")
    if wanted is not None and wanted - set(got):
        raise MissingMemberError(f"{archive}: no member(s) "
                                 f"{', '.join(sorted(wanted - set(got)))}")
    return got


def _link_kind(info: tarfile.TarInfo) -> str:
    return "hard link" if info.islnk() else "symlink"


def _check_tar_member(archive: Path, info: tarfile.TarInfo, dest: Path) -> None:
    """Refuse `info` unless the data filter accepts it as it is."""
    name = info.name
    # The filter would strip a leading "/" and extract the member under dest; an archive that
    # names an absolute path is refused instead, like one that climbs out.
    if name.startswith("/"):
        raise UnsafeArchiveError(f"{archive}: member '{name}' has an absolute path; refused")
    try:
        tarfile.data_filter(info, str(dest))
    except tarfile.AbsolutePathError:
        raise UnsafeArchiveError(f"{archive}: member '{name}' has an absolute path; "
                                 "refused") from None
    except tarfile.OutsideDestinationError:
        raise UnsafeArchiveError(f"{archive}: member '{name}' climbs out of the target "
                                 f"directory {dest}; refused") from None
    except tarfile.SpecialFileError:
        raise UnsafeArchiveError(f"{archive}: member '{name}' is a device or fifo; "
                                 "refused") from None
    except tarfile.AbsoluteLinkError:
        raise UnsafeArchiveError(f"{archive}: {_link_kind(info)} '{name}' points to the "
                                 f"absolute path '{info.linkname}'; refused") from None
    except tarfile.LinkOutsideDestinationError:
        raise UnsafeArchiveError(f"{archive}: {_link_kind(info)} '{name}' -> '{info.linkname}' "
                                 f"points outside the target directory {dest}; refused") from None
    except tarfile.FilterError as e:  # a refusal of a later Python the cases above do not name
        raise UnsafeArchiveError(f"{archive}: member '{name}' refused: {e}") from None


def _extract_tar(archive: Path, dest: Path, wanted: set[str] | None) -> dict[str, Path]:
    got: dict[str, Path] = {}
    with tarfile.open(archive, "r:*") as tar:
        for info in tar:
            _check_tar_member(archive, info, dest)
            if info.issym() or info.islnk():
                if wanted is not None and info.name in wanted:
                    raise UnsafeArchiveError(f"{archive}: member '{info.name}' is a link, not a "
                                             "file; refused")
                continue
            if info.isdir() or (wanted is not None and info.name not in wanted):
                continue
            target = (dest / info.name).resolve()
            src = tar.extractfile(info)
            assert src is not None
            with src, atomic_open(target, "wb") as out:
                copy_with_progress(src, out, total=info.size, desc=info.name)
            got[info.name] = target
            if wanted is not None and set(got) == wanted:
                break  # the rest of a large archive need not be read
    return got


def _zip_target(archive: Path, dest: Path, name: str) -> Path:
    """`dest / name`, refusing a name that is absolute or resolves outside `dest`."""
    if (name.startswith(("/", "\\")) or PurePosixPath(name).is_absolute()
            or PureWindowsPath(name).drive):
        raise UnsafeArchiveError(f"{archive}: member '{name}' has an absolute path; refused")
    target = (dest / name).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise UnsafeArchiveError(f"{archive}: member '{name}' climbs out of the target "
                                 f"directory {dest}; refused")
    return target


def _is_zip_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _extract_zip(archive: Path, dest: Path, wanted: set[str] | None) -> dict[str, Path]:
    got: dict[str, Path] = {}
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:  # a zip has a directory: check every member before writing any
            _zip_target(archive, dest, info.filename)
            if _is_zip_link(info) and wanted is not None and info.filename in wanted:
                raise UnsafeArchiveError(f"{archive}: member '{info.filename}' is a link, "
                                         "not a file; refused")
        for info in infos:
            if info.is_dir() or _is_zip_link(info):
                continue
            if wanted is not None and info.filename not in wanted:
                continue
            target = _zip_target(archive, dest, info.filename)
            with zf.open(info) as src, atomic_open(target, "wb") as out:
                copy_with_progress(src, out, total=info.file_size, desc=info.filename)
            got[info.filename] = target
    return got
