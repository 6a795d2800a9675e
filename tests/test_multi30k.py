"""Multi30k: the real files read right, and downloads verified, atomic, cached, and failing clearly.

Downloads are tested against a local HTTP server on 127.0.0.1 only; nothing leaves the machine.
"""

import functools
import gzip
import hashlib
import http.server
import socket
import threading
import urllib.parse
import urllib.request

import pytest

from attnkit.data import (
    Multi30kSpec,
    Multi30kTextSpec,
    load_corpus,
    load_multi30k,
    multi30k_path,
    resolve_data_dir,
)
from attnkit.data.multi30k import LANGS, SHA256, SPLITS
from attnkit.errors import DataError


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Fail any test that would fetch from a host other than 127.0.0.1."""
    real_urlopen = urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        host = urllib.parse.urlsplit(url if isinstance(url, str) else url.full_url).hostname
        assert host == "127.0.0.1", f"test tried to reach {url}"
        return real_urlopen(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)


@pytest.mark.parametrize("split, size", [("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)])
def test_real_multi30k_de_en_sizes(shared_data, split, size):
    pairs = load_multi30k(split, "de", "en", data_dir=shared_data, download=False)
    assert len(pairs) == size
    assert all(src.strip() and tgt.strip() for src, tgt in pairs)


def test_real_multi30k_first_pair_and_checksums(shared_data):
    pairs = load_corpus(Multi30kSpec("train", "de", "en", data_dir=shared_data, download=False))
    assert pairs[0] == (
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        "Two young, White males are outside near many bushes.",
    )
    english = load_corpus(Multi30kTextSpec("train", "en", data_dir=shared_data, download=False))
    assert english == [tgt for _, tgt in pairs]  # the monolingual spec reads the same file
    assert set(SHA256) == {f"{split}.{lang}.gz" for split in SPLITS for lang in LANGS}
    for name, digest in SHA256.items():
        data = (shared_data / "multi30k" / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name


def test_data_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNKIT_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert resolve_data_dir() == tmp_path / "home" / ".cache" / "attnkit"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_data_dir() == tmp_path / "xdg" / "attnkit"
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path / "env"))
    assert resolve_data_dir() == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "explicit") == tmp_path / "explicit"


def test_env_data_dir_is_used_for_lookup(tmp_path, monkeypatch):
    make_split(tmp_path / "multi30k", "val", {"de": "Hallo\n", "en": "Hello\n"})
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    assert load_multi30k("val", "de", "en", download=False) == [("Hallo", "Hello")]
    # An explicit directory wins over the environment.
    with pytest.raises(DataError, match=f"no such file: {tmp_path / 'other' / 'multi30k' / 'val.de.gz'}"):
        load_multi30k("val", "de", "en", data_dir=tmp_path / "other", download=False)


def test_missing_file_without_download_says_where_to_put_it(tmp_path):
    with pytest.raises(DataError) as info:
        multi30k_path("train", "fr", data_dir=tmp_path, download=False)
    message = str(info.value)
    assert f"{tmp_path / 'multi30k'}/<split>.<lang>.gz" in message
    assert "--data-dir" in message and "ATTNKIT_DATA" in message


def test_unknown_split_or_language(tmp_path):
    with pytest.raises(DataError, match="train, val, test_2016_flickr"):
        multi30k_path("test2017", "de", data_dir=tmp_path)
    with pytest.raises(DataError, match="de, en, fr, cs"):
        load_multi30k("train", "de", "ja", data_dir=tmp_path)
    with pytest.raises(DataError, match="language 'ja'; choose one of de, en, fr, cs"):
        Multi30kTextSpec("train", "ja", data_dir=tmp_path)


# --- downloads, from a local server ---------------------------------------------------------


def make_split(folder, split, texts):
    """Write ``<split>.<lang>.gz`` files; return their SHA-256 table."""
    folder.mkdir(parents=True, exist_ok=True)
    table = {}
    for lang, text in texts.items():
        data = gzip.compress(text.encode("utf-8"))
        (folder / f"{split}.{lang}.gz").write_bytes(data)
        table[f"{split}.{lang}.gz"] = hashlib.sha256(data).hexdigest()
    return table


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Serve ``tmp_path/served`` on 127.0.0.1; yields (base_url, served_dir, requested_paths)."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)  # a proxy must not see (or relay) these requests
    monkeypatch.setenv("no_proxy", "*")
    served = tmp_path / "served"
    served.mkdir()
    requested = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requested.append(self.path)

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(served))
    )
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", served, requested
    httpd.shutdown()
    httpd.server_close()


def test_download_verifies_writes_atomically_and_caches(tmp_path, server):
    base_url, served, requested = server
    checksums = make_split(served, "train", {"de": "Hallo\nWelt\n", "en": "Hello\nworld\n"})
    data_dir = tmp_path / "data"

    path = multi30k_path("train", "de", data_dir, base_url=base_url, checksums=checksums)
    assert path == data_dir / "multi30k" / "train.de.gz"
    assert path.read_bytes() == (served / "train.de.gz").read_bytes()
    assert requested == ["/train.de.gz"]
    assert [p.name for p in path.parent.iterdir()] == ["train.de.gz"]  # no temp file left behind

    again = multi30k_path("train", "de", data_dir, base_url=base_url, checksums=checksums)
    assert again == path
    assert requested == ["/train.de.gz"]  # cached: no second request


def test_bad_checksum_fails_cleanly_and_leaves_no_file(tmp_path, server):
    base_url, served, requested = server
    make_split(served, "val", {"en": "Hello\n"})
    data_dir = tmp_path / "data"
    with pytest.raises(DataError, match="val.en.gz is corrupt: SHA-256"):
        multi30k_path("val", "en", data_dir, base_url=base_url, checksums={"val.en.gz": "0" * 64})
    assert requested == ["/val.en.gz"]
    assert list((data_dir / "multi30k").iterdir()) == []


def test_matching_checksum_but_broken_gzip_is_rejected(tmp_path, server):
    base_url, served, _ = server
    broken = gzip.compress(b"Hello\n" * 50)[:-20]
    (served / "val.en.gz").write_bytes(broken)
    data_dir = tmp_path / "data"
    checksums = {"val.en.gz": hashlib.sha256(broken).hexdigest()}
    with pytest.raises(DataError, match="not a valid gzip file"):
        multi30k_path("val", "en", data_dir, base_url=base_url, checksums=checksums)
    assert list((data_dir / "multi30k").iterdir()) == []


def test_http_error_says_where_to_put_the_files(tmp_path, server):
    base_url, _, _ = server  # serves nothing: 404
    with pytest.raises(DataError, match="download of .*val.cs.gz failed.*Put the Multi30k files at"):
        multi30k_path("val", "cs", tmp_path, base_url=base_url, checksums={"val.cs.gz": "0" * 64})
    assert list((tmp_path / "multi30k").iterdir()) == []


def test_unreachable_server_says_where_to_put_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("no_proxy", "*")
    with socket.socket() as sock:  # a port that was just free, so nothing listens on it now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(DataError) as info:
        multi30k_path("test_2016_flickr", "de", tmp_path, base_url=f"http://127.0.0.1:{port}/")
    message = str(info.value)
    assert "download of" in message and "failed" in message
    assert f"{tmp_path / 'multi30k'}/<split>.<lang>.gz" in message
    assert "--data-dir" in message and "ATTNKIT_DATA" in message
    assert not (tmp_path / "multi30k" / "test_2016_flickr.de.gz").exists()
