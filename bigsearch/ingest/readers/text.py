"""Line bookkeeping for text inputs (CSV, TSV, LIBSVM).

The parsers read blocks and count rows, not lines. When something is wrong, these
helpers re-read the file (streaming, on the error path only) to find the line a
message should name.
"""

import gzip
import zlib

from ...errors import InputError
from .base import open_binary


def iter_lines(path):
    """(line number from 1, line without its end) for every line of the decompressed file."""
    stream, raw = open_binary(path)
    try:
        for number, line in enumerate(stream, 1):
            yield number, line.rstrip(b"\r\n")
    except (EOFError, OSError, zlib.error, gzip.BadGzipFile):
        return
    finally:
        raw.close()


def locate(path, skip_lines, row, match=None, is_data=bool):
    """Line number of data row ``row`` (0-based), or with ``match`` of the first data row at or
    after ``row`` whose line satisfies it. Data rows are the lines after the first
    ``skip_lines`` for which ``is_data(line)`` holds. None when there is no such line."""
    seen = 0
    for number, line in iter_lines(path):
        if number <= skip_lines or not is_data(line):
            continue
        if seen >= row and (match is None or match(line)):
            return number
        seen += 1
    return None


def count_lines(path):
    """Complete lines that can be read before the data ends or breaks."""
    last = 0
    for last, _ in iter_lines(path):
        pass
    return last


def read_sample(path, size):
    """(the first ``size`` bytes of the decompressed file cut after the last complete line,
    True when that is the whole file)."""
    stream, raw = open_binary(path)
    try:
        data = stream.read(size)
        more = bool(stream.read(1))
    except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: the gzip data ends early or is corrupt within the first "
                         f"{size >> 20} MiB ({e})") from None
    finally:
        raw.close()
    if more and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]
    return data, not more


NUL = b"\0"


def check_text(path, sample, what):
    """Refuse a binary or non-UTF-8 file before a parser meets it, naming the first bad byte."""
    if NUL in sample:
        raise InputError(f"{path}: a binary file (byte {sample.index(NUL)} is NUL), not {what} text; "
                         "give the right source.format or convert it")
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        line = sample.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path}, line {line}: not UTF-8 text (byte {sample[e.start]:#04x} at offset {e.start}); "
                         "convert it, e.g. iconv -f latin1 -t utf-8 IN > OUT") from None
