"""The one place tcplan reads and writes user files: checked loaders and atomic writes.

Every input path goes through here: problem files (:func:`read_text`), JSON-lines batches
(:func:`bounded_lines`) and ``.npy`` arrays (:func:`load_npy`); every output of ``tcplan run``
goes out through :func:`write_arrays`.  Each reader checks sizes from the file's metadata
*before* it reads or allocates (limits in :mod:`model.limits`), never unpickles, and turns
every OS error into a located ``bad-request`` / ``bad-problem`` error that carries the OS's
reason.  Writes are atomic as a set: temporary files in the target folder, renamed into place
only once every one is written (docs/threats.md).
"""

from __future__ import annotations

import errno
import os
import pathlib
import re
import stat
import tempfile
from typing import IO, Iterator

import numpy as np

from tcplan.model import limits
from tcplan.model.rules import TcplanError, fail


def open_input(path: str | os.PathLike) -> IO[bytes]:
    """Open a file for reading without blocking on a FIFO that has no writer (a named pipe
    nobody writes would hang ``open``): it opens non-blocking, then reads block as usual, so
    a pipe with a writer (``<(command)``) is read whole and one without reads as empty."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def os_reason(e: OSError) -> str:
    """The OS's reason for an error, never ``None`` (``strerror`` is unset for some)."""
    return e.strerror or str(e) or type(e).__name__


# ---------------------------------------------------------------------------------------
# Text files (problem files)
# ---------------------------------------------------------------------------------------
def read_text(path: str | os.PathLike, rule: str = "bad-problem",
              max_bytes: int = limits.PROBLEM_FILE_MAX_BYTES) -> str:
    """A UTF-8 text file of at most ``max_bytes``: read no more than that, whatever it is
    (a device, a pipe, a huge file)."""
    where = str(path)
    try:
        with open_input(path) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as e:
        raise _error(rule, where, f"cannot read the file ({os_reason(e)})",
                     "give a readable UTF-8 YAML file") from None
    if len(data) > max_bytes:
        raise _error(rule, where, f"the file is larger than {max_bytes:,} bytes",
                     "a problem file is a few KiB of YAML")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        col = e.start - data.rfind(b"\n", 0, e.start)
        raise _error(rule, f"{where}:{line}:{col}", f"not UTF-8 (byte {e.start + 1})",
                     "save the file as UTF-8") from None


def _error(rule: str, where: str, detail: str, fix: str) -> TcplanError:
    if rule == "bad-problem":
        return fail(rule, where=where, detail=detail, fix=fix)
    return fail(rule, detail=f"{where}: {detail}", fix=fix)


# ---------------------------------------------------------------------------------------
# JSON-lines batches
# ---------------------------------------------------------------------------------------
class Overlong:
    """A batch line longer than the line limit: it was skipped, unread into memory."""

    def __init__(self, limit: int):
        self.limit = limit


def open_lines(path: str, stdin: IO) -> IO:
    """A JSON-lines file opened for :func:`bounded_lines` (``-``: standard input)."""
    if path == "-":
        return getattr(stdin, "buffer", stdin)
    try:
        return open_input(path)
    except OSError as e:
        raise fail("bad-request", detail=f"--batch: cannot read {path} ({os_reason(e)})",
                   fix="give a readable JSON-lines file, or - for standard input") from None


def bounded_lines(fh: IO, max_bytes: int = limits.JSON_LINE_MAX_BYTES) -> Iterator:
    """The lines of a stream (binary or text) without their line ends; a line longer than
    ``max_bytes`` comes as :class:`Overlong` and its rest is skipped in ``max_bytes`` pieces,
    so one endless line costs at most ``max_bytes`` of memory.  A read that fails ends the
    lines with a ``bad-request`` error carrying the OS's reason."""
    lineno = 0
    while True:
        lineno += 1
        try:
            line = fh.readline(max_bytes + 1)
            nl = b"\n" if isinstance(line, bytes) else "\n"
            if len(line) > max_bytes and not line.endswith(nl):
                yield Overlong(max_bytes)  # answered now; its rest is skipped, up to a bound
                skipped = len(line)
                while line and not line.endswith(nl):
                    if skipped > limits.JSON_LINE_SKIP_MAX_BYTES:
                        raise fail("bad-request", detail=f"--batch: line {lineno} does not "
                                   f"end within {limits.JSON_LINE_SKIP_MAX_BYTES:,} bytes: "
                                   "the batch stops there", fix="one request per line")
                    line = fh.readline(max_bytes)
                    skipped += len(line)
                continue
        except OSError as e:
            raise fail("bad-request", detail=f"--batch: reading stopped at line {lineno} "
                       f"({os_reason(e)})", fix="give a readable JSON-lines file") from None
        if not line:
            return
        yield line.rstrip(b"\r\n" if isinstance(line, bytes) else "\r\n")


# ---------------------------------------------------------------------------------------
# .npy arrays
# ---------------------------------------------------------------------------------------
def load_npy(path: str, what: str, max_elements: int = limits.SIM_MAX_ELEMENTS
             ) -> np.ndarray:
    """A ``.npy`` array, checked from its header before any data is read: a numpy format
    header of bounded size, a dtype without Python objects (nothing is unpickled), a shape
    of at most ``max_elements`` elements (a problem's input holds no more than its tensor T)
    and :data:`model.limits.NPY_MAX_BYTES` bytes, and a file that holds exactly that many
    bytes after the header."""
    import ml_dtypes  # noqa: F401 - registers bfloat16 and float8 with numpy's loader
    fmt = np.lib.format
    try:
        with open_input(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            try:
                version = fmt.read_magic(fh)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f"format version {version[0]}.{version[1]} is not "
                                     "read (1.0 and 2.0 are)")
                start = fh.tell()
                _header_numbers(fh, version)
                fh.seek(start)
                try:
                    shape, fortran, dtype = (fmt.read_array_header_1_0 if version == (1, 0)
                                             else fmt.read_array_header_2_0)(
                        fh, max_header_size=limits.NPY_HEADER_MAX_BYTES)
                except ValueError:
                    fh.seek(start)
                    shape, fortran, dtype = _float8_header(fh, version)
            except limits.NumberTooLong as e:
                raise fail("bad-request", detail=f"{what}: the .npy header: {e.detail}",
                           fix="give a .npy file written by numpy.save") from None
            except Exception as e:  # noqa: BLE001 - numpy parses the header text with
                # ast and tokenize: whatever a damaged header raises, it is not an array
                raise fail("bad-request", detail=f"{what}: not a .npy array ({_short(e)})",
                           fix="give a .npy file written by numpy.save") from None
            _check_header(what, shape, dtype)
            count = limits.product(shape)
            most = min(max_elements, limits.SIM_MAX_ELEMENTS,
                       limits.NPY_MAX_BYTES // dtype.itemsize)
            if count > most:
                raise fail("bad-request", detail=f"{what}: the header declares shape "
                           f"{_shape_text(shape)}, {limits.count_text(count)} elements of "
                           f"{dtype.itemsize} B; this input holds at most {most:,}",
                           fix="give the tensor of the problem's shape")
            need = fh.tell() + count * dtype.itemsize
            if size != need:
                raise fail("bad-request", detail=f"{what}: the header says {shape} {dtype} "
                           f"({need:,} bytes with the header) but the file has {size:,} bytes",
                           fix="the file is truncated or padded: write it again with "
                               "numpy.save")
            data = np.fromfile(fh, dtype=dtype, count=count)
    except MemoryError:
        raise fail("bad-request", detail=f"{what}: {path} does not fit in memory",
                   fix="give a smaller array") from None
    except OSError as e:
        raise fail("bad-request", detail=f"{what}: cannot read {path} ({os_reason(e)})",
                   fix="give a readable .npy file") from None
    return data.reshape(shape, order="F" if fortran else "C")


#: a number in a .npy header's text (a Python literal: 12, 0x1f, 1_000, 1e3), not a
#: dtype's size inside a name ('<i4')
_HEADER_NUMBER = re.compile(rb"(?<![A-Za-z0-9_])[-+]?[0-9][0-9A-Za-z_.]*")


def _header_numbers(fh, version: tuple[int, int]) -> None:
    """Every number of the header's text within :data:`model.limits.NUMBER_MAX_CHARS`,
    before numpy's ``ast.literal_eval`` converts them (``0x`` and 4,300 digits or more
    would give a shape too long to print); the caller seeks back."""
    raw = fh.read(2 if version == (1, 0) else 4)
    if len(raw) not in (2, 4):
        return  # (numpy says what is wrong)
    n = int.from_bytes(raw, "little")
    for m in _HEADER_NUMBER.finditer(fh.read(min(n, limits.NPY_HEADER_MAX_BYTES))):
        limits.number_text(m.group().decode("ascii"))


def _shape_text(shape: tuple) -> str:
    text = str(shape)  # (each size within NUMBER_MAX_CHARS: printable)
    return text if len(text) <= 120 else text[:116] + "...)"


def _float8_header(fh, version: tuple[int, int]) -> tuple:
    """The header numpy.save writes for an ml_dtypes float8_e5m2 array, ``'<f1'``, which
    numpy cannot read back: its bytes, as one-byte bit patterns (the problem's dtype
    then views them).  Any other header numpy refused stays refused."""
    import ast
    import struct
    n = struct.unpack("<H" if version == (1, 0) else "<I",
                      fh.read(2 if version == (1, 0) else 4))[0]
    if n > limits.NPY_HEADER_MAX_BYTES:
        raise ValueError("header too large")
    d = ast.literal_eval(fh.read(n).decode("latin1"))
    if not isinstance(d, dict) or d.get("descr") not in ("<f1", "|f1", ">f1", "=f1") \
            or set(d) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"descr {d.get('descr') if isinstance(d, dict) else d!r} is not "
                         "a dtype numpy reads")
    return d["shape"], bool(d["fortran_order"]), np.dtype(np.uint8)


def _check_header(what: str, shape, dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise fail("bad-request", detail=f"{what}: dtype {dtype} holds Python objects (they "
                   "would be unpickled; tcplan never does)", fix="save a numeric array")
    if not isinstance(shape, tuple) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise fail("bad-request", detail=f"{what}: shape {shape!r} is not a tuple of sizes",
                   fix="give a .npy file written by numpy.save")
    if dtype.itemsize == 0:
        raise fail("bad-request", detail=f"{what}: dtype {dtype} has no size",
                   fix="save a numeric array")


def _short(e: BaseException) -> str:
    text = str(e).replace("\n", " ")
    return text if len(text) <= 200 else text[:200] + "..."


# ---------------------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------------------
#: numpy dtypes that only ml_dtypes defines (a .npy header names them)
ML_DTYPE_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _save(fh, arr: np.ndarray) -> None:
    """``numpy.save``, except that an ml_dtypes array (bfloat16, float8) is named by its
    dtype's name in the header instead of numpy's void ``V2``: ``np.load`` then gives it
    back as that dtype wherever ml_dtypes is imported (docs/decisions.md item 81)."""
    if arr.dtype.name in ML_DTYPE_NAMES:
        arr = np.ascontiguousarray(arr)
        header = {"descr": arr.dtype.name, "fortran_order": False, "shape": arr.shape}
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(arr.tobytes())
        return
    np.save(fh, arr, allow_pickle=False)


def write_arrays(out: str, arrays: dict[str, np.ndarray]) -> list[pathlib.Path]:
    """Write ``out/NAME.npy`` for every array, all or nothing: each goes to a temporary file
    in ``out`` first (written and flushed to disk), and only when every one is written are
    they renamed into place with ``os.replace``.  On any failure every temporary file is
    removed, and so is every folder this call created: ``out`` is left as it was."""
    folder = pathlib.Path(out)
    finals = [folder / f"{name}.npy" for name in arrays]
    for final in finals:
        try:
            st = os.stat(final)
        except FileNotFoundError:
            continue
        except OSError as e:  # (a name too long, a component that is a file, ...)
            if e.errno == errno.ENOTDIR:
                continue  # _make_folder says what is wrong with the folder
            raise fail("bad-request", detail=f"--out {out}: cannot use {final} "
                       f"({os_reason(e)}); nothing was changed",
                       fix="give another folder") from None
        if not stat.S_ISREG(st.st_mode):
            raise fail("bad-request", detail=f"--out {out}: {final} exists and is not a "
                       "regular file; nothing was changed",
                       fix="remove it or give another folder")
    created = _make_folder(folder, out)
    temps: list[str] = []
    done, replaced, current = False, 0, folder
    try:
        mode = _file_mode()
        for final, arr in zip(finals, arrays.values()):
            current = final
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{final.stem}.", suffix=".npy.tmp")
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                # through a plain writer, so a failing write raises the OS's own error
                # (numpy's direct file path reports only a short count)
                _save(_Writer(fh), arr)
                fh.flush()
                os.fsync(fh.fileno())
        replaced = 0
        for tmp, final in zip(temps, finals):
            os.replace(tmp, final)
            replaced += 1
        done = True
    except OSError as e:
        changed = ("nothing was changed" if not replaced else
                   f"{replaced} of {len(finals)} outputs were already in place")
        raise fail("bad-request", detail=f"--out {out}: cannot write "
                   f"{e.filename or current} ({os_reason(e)}); {changed}",
                   fix="give a writable folder with room for the outputs") from None
    finally:
        if not done:
            for tmp in temps:
                _remove(tmp)
            for d in reversed(created):
                _rmdir(d)
    return finals


class _Writer:
    """A file seen only through ``write``: numpy then writes in chunks through Python."""

    def __init__(self, fh: IO[bytes]):
        self.write = fh.write


def _make_folder(folder: pathlib.Path, out: str) -> list[pathlib.Path]:
    """Create ``folder`` and its missing parents; the ones created, outermost first."""
    missing = []
    p = folder
    try:
        while not os.path.lexists(p) and p != p.parent:
            missing.append(p)
            p = p.parent
        missing.reverse()
        for d in missing:
            d.mkdir()
    except OSError as e:
        for d in reversed(missing):
            _rmdir(d)
        raise fail("bad-request", detail=f"--out {out}: cannot create {e.filename or folder} "
                   f"({os_reason(e)})", fix="give a writable folder") from None
    if not folder.is_dir():
        raise fail("bad-request", detail=f"--out {out}: not a folder",
                   fix="give a folder (it is created when missing)")
    return missing


def _file_mode() -> int:
    """The mode ``open`` would give a new file (0o666 less the umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _rmdir(path: pathlib.Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
