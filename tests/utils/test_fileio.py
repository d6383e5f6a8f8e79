import hashlib
import os

import pytest

from tupe_tf.utils import fileio


def test_hashes_match_hashlib(tmp_path):
    data = b"tupe" * 100_000
    path = tmp_path / "blob"
    path.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    assert fileio.sha256_hex(data) == expected
    assert fileio.file_sha256(str(path), chunk_size=4096) == expected


def test_write_text_atomically_replaces_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "out.txt"
    fileio.write_text_atomically(str(path), "one\n")
    fileio.write_text_atomically(str(path), "two\n")
    assert path.read_text() == "two\n"
    assert os.listdir(path.parent) == ["out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_atomic_files_publish_all_or_nothing(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("old a")
    with pytest.raises(RuntimeError):
        with fileio.atomic_files([str(a), str(b)]) as (tmp_a, tmp_b):
            with open(tmp_a, "w") as f:
                f.write("new a")
            raise RuntimeError("interrupted")
    assert sorted(os.listdir(tmp_path)) == ["a"]
    assert a.read_text() == "old a"
    with fileio.atomic_files([str(a), str(b)]) as (tmp_a, tmp_b):
        assert os.path.basename(tmp_a).startswith(".a.")
        for tmp, text in ((tmp_a, "new a"), (tmp_b, "new b")):
            with open(tmp, "w") as f:
                f.write(text)
        assert a.read_text() == "old a"  # nothing published inside the body
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_atomic_directory_keeps_old_until_complete(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(FileExistsError, match="Preset .*--overwrite"):
        with fileio.atomic_directory(str(target), what="Preset"):
            pass
    with pytest.raises(ValueError):
        with fileio.atomic_directory(str(target), overwrite=True) as tmp:
            (open(os.path.join(tmp, "half"), "w")).close()
            raise ValueError("failed")
    assert os.listdir(target) == ["old.txt"]
    with fileio.atomic_directory(str(target), overwrite=True) as tmp:
        (open(os.path.join(tmp, "new.txt"), "w")).close()
    assert os.listdir(target) == ["new.txt"]
    assert os.listdir(tmp_path) == ["out"]


def _interrupt_after_creating(monkeypatch, name, on_call):
    """Ctrl-C right after the `on_call`-th file or directory is created,
    before the helper that created it returns (the worst moment)."""
    real = getattr(fileio, name)
    calls = []

    def create_then_interrupt(path):
        real(path)
        calls.append(path)
        if len(calls) == on_call:
            raise KeyboardInterrupt

    monkeypatch.setattr(fileio, name, create_then_interrupt)
    return calls


def _enter(context_manager):
    with context_manager:
        pass


@pytest.mark.parametrize(
    "creator, on_call, use",
    [
        (
            "_new_file",
            2,
            lambda d: _enter(fileio.atomic_files([d / "a", d / "b", d / "c"])),
        ),
        (
            "_new_file",
            1,
            lambda d: fileio.make_writable_directory(str(d), "--x"),
        ),
        ("_new_file", 1, lambda d: fileio.write_text_atomically(d / "v", "x")),
        (
            "_new_private_directory",
            1,
            lambda d: _enter(fileio.atomic_directory(d / "model")),
        ),
        (
            "_new_private_directory",
            1,
            lambda d: _enter(fileio.work_directory(d, ".beam-")),
        ),
    ],
)
def test_an_interrupt_while_creating_temporaries_leaves_none(
    tmp_path, monkeypatch, creator, on_call, use
):
    created = _interrupt_after_creating(monkeypatch, creator, on_call)
    with pytest.raises(KeyboardInterrupt):
        use(tmp_path)
    assert len(created) == on_call  # They existed,
    assert os.listdir(tmp_path) == []  # and were removed.


def test_made_directory_removes_what_it_created_when_interrupted(
    tmp_path, monkeypatch
):
    _interrupt_after_creating(monkeypatch, "_new_file", 1)  # The write test.
    with pytest.raises(KeyboardInterrupt):
        _enter(fileio.made_directory(tmp_path / "a" / "b", "--output_dir"))
    assert os.listdir(tmp_path) == []


def test_split_and_expand_patterns(tmp_path):
    for name in ("b.txt", "a.txt", "c.gz"):
        (tmp_path / name).write_text("x")
    assert fileio.split_patterns(" a , ,b") == ["a", "b"]
    assert fileio.split_patterns(["a,b", "c"]) == ["a", "b", "c"]
    files = fileio.expand_patterns(
        f"{tmp_path}/*.txt,{tmp_path}/c.gz", "--input"
    )
    assert [os.path.basename(f) for f in files] == ["a.txt", "b.txt", "c.gz"]


def test_expand_errors_name_the_source_and_the_pattern(tmp_path):
    with pytest.raises(ValueError, match=r"--train_files: pattern .*x\*"):
        fileio.expand_pattern(str(tmp_path / "x*"), "--train_files")
    with pytest.raises(FileNotFoundError, match=r"Input: file .*nope.txt"):
        fileio.expand_pattern(str(tmp_path / "nope.txt"), "Input")
    # exists_fn=None passes a plain path through for the caller to check.
    missing = str(tmp_path / "nope.txt")
    assert fileio.expand_pattern(missing, "Shard", exists_fn=None) == [missing]
