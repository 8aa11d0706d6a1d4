"""A pyarrow filesystem that counts the bytes read through it (for I/O bound tests)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs


class _CountingFile:
    """File-like object for PythonFile: forwards to a pyarrow RandomAccessFile."""

    def __init__(self, inner, counter):
        self._f = inner
        self._counter = counter
        self.closed = False
        self.mode = "rb"

    def read(self, nbytes=-1):
        data = self._f.read() if nbytes is None or nbytes < 0 else self._f.read(nbytes)
        self._counter.bytes_read += len(data)
        self._counter.reads += 1
        return data

    def read_at(self, nbytes, offset):
        data = self._f.read_at(nbytes, offset)
        self._counter.bytes_read += len(data)
        self._counter.reads += 1
        return data

    def seek(self, pos, whence=0):
        return self._f.seek(pos, whence)

    def tell(self):
        return self._f.tell()

    def size(self):
        return self._f.size()

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def close(self):
        self.closed = True
        self._f.close()


class _Handler(pafs.FileSystemHandler):
    def __init__(self, counter):
        self.inner = pafs.LocalFileSystem()
        self.counter = counter

    def __eq__(self, other):
        return isinstance(other, _Handler) and other.counter is self.counter

    def __ne__(self, other):
        return not self == other

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return self.inner.normalize_path(path)

    def get_file_info(self, paths):
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.inner.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("not supported")

    def delete_file(self, path):
        self.inner.delete_file(path)

    def move(self, src, dest):
        self.inner.move(src, dest)

    def copy_file(self, src, dest):
        self.inner.copy_file(src, dest)

    def open_input_stream(self, path):
        return pa.PythonFile(_CountingFile(self.inner.open_input_file(path), self.counter),
                             mode="r")

    def open_input_file(self, path):
        return pa.PythonFile(_CountingFile(self.inner.open_input_file(path), self.counter),
                             mode="r")

    def open_output_stream(self, path, metadata):
        return self.inner.open_output_stream(path)

    def open_append_stream(self, path, metadata):
        return self.inner.open_append_stream(path)


class CountingFileSystem:
    """``.fs`` is a pyarrow FileSystem over the local disk; ``.bytes_read`` counts every
    byte read through files it opened, ``.reads`` the read calls."""

    def __init__(self):
        self.bytes_read = 0
        self.reads = 0
        self.fs = pafs.PyFileSystem(_Handler(self))

    def reset(self):
        self.bytes_read = 0
        self.reads = 0
