"""A small local server that speaks the Hugging Face Hub's HTTP protocol, for tests of pushes and downloads through the
real `huggingface_hub` client (no mock).

Model repositories only. Routes: `POST /api/repos/create`, `POST /api/validate-yaml`,
`POST /api/models/{repo}/preupload/{rev}` (every file "regular": contents travel inline in the commit),
`POST /api/models/{repo}/commit/{rev}` (NDJSON), `POST /api/models/{repo}/branch/{branch}`,
`GET /api/models/{repo}[/revision/{rev}]`, `GET /api/models/{repo}/tree/{rev}[/{path}]`,
`GET /api/models/{repo}/commits/{rev}`, `HEAD|GET /{repo}/resolve/{rev}/{path}` (with `X-Repo-Commit`, `ETag`,
`Content-Length`, byte ranges). Errors carry `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`)
like the Hub. Blobs are stored content-addressed (git blob sha1) in a folder; commits get real-looking 40-hex shas;
a revision is a branch name or a full commit sha.

Usage: `with HubServer(root, token="hf_x") as hub: os.environ["HF_ENDPOINT"] = hub.url`. With a token, writes and
private reads need `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
#: a subset of the Hub's license ids, enough to catch typos in generated cards
LICENSES = {
    "apache-2.0",
    "mit",
    "bsd-3-clause",
    "cc-by-4.0",
    "cc-by-sa-4.0",
    "cc-by-nc-4.0",
    "openrail",
    "llama3",
    "gpl-3.0",
    "other",
    "unknown",
}
PIPELINE_TAGS = {
    "text-generation",
    "fill-mask",
    "text-classification",
    "feature-extraction",
    "token-classification",
    "question-answering",
    "text2text-generation",
}


def git_blob_sha(data: bytes) -> str:
    """The git object id of a blob (what the Hub calls a regular file's oid / ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class Commit:
    sha: str
    parent: str | None
    files: dict[str, str]  # path -> blob oid
    title: str
    message: str
    date: str


@dataclass
class Repo:
    repo_id: str
    private: bool
    created_at: str
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    commits: dict[str, Commit] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def validate_card(content: str) -> list[str]:
    """Errors in a README's YAML metadata, checked like the Hub does for the fields our cards use."""
    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", content, re.DOTALL)
    if not match:
        return []  # no metadata: allowed (the Hub warns)
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        return [f"YAML parse error: {exc}"]
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return ["metadata must be a YAML mapping"]
    errors = []
    if "license" in meta and meta["license"] not in LICENSES:
        errors.append(f'"license" must be a known license id, got {meta["license"]!r}')
    if "pipeline_tag" in meta and meta["pipeline_tag"] not in PIPELINE_TAGS:
        errors.append(f'"pipeline_tag" is not a known task: {meta["pipeline_tag"]!r}')
    for key in ("tags", "datasets", "base_model"):
        value = meta.get(key)
        if value is not None and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            errors.append(f'"{key}" must be a string or a list of strings')
    if "library_name" in meta and not isinstance(meta["library_name"], str):
        errors.append('"library_name" must be a string')
    for entry in meta.get("model-index") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            errors.append('"model-index[].name" must be a string')
            continue
        for result in entry.get("results") or []:
            task, dataset = result.get("task") or {}, result.get("dataset") or {}
            if not isinstance(task.get("type"), str):
                errors.append('"model-index[].results[].task.type" is required')
            if not (isinstance(dataset.get("name"), str) and isinstance(dataset.get("type"), str)):
                errors.append('"model-index[].results[].dataset" needs "name" and "type"')
            metrics = result.get("metrics")
            if not metrics or not all(
                isinstance(m, dict) and isinstance(m.get("type"), str) and "value" in m for m in metrics
            ):
                errors.append('"model-index[].results[].metrics" needs entries with "type" and "value"')
    return errors


class HubState:
    """Repositories, commits and blobs (on disk, content-addressed), shared by the request handler threads."""

    def __init__(self, root: Path, token: str | None):
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.counter = 0

    # -- storage -------------------------------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        oid = git_blob_sha(data)
        path = self.root / "blobs" / oid
        if not path.exists():
            path.write_bytes(data)
        return oid

    def blob_path(self, oid: str) -> Path:
        return self.root / "blobs" / oid

    def _save_refs(self, repo: Repo) -> None:
        folder = self.root / "repos" / repo.repo_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "refs.json").write_text(json.dumps({"private": repo.private, "branches": repo.branches}, indent=1))

    def new_commit(self, repo: Repo, parent: str | None, files: dict[str, str], title: str, message: str) -> Commit:
        self.counter += 1
        tree = "\n".join(f"{path} {oid}" for path, oid in sorted(files.items()))
        payload = f"tree {hashlib.sha1(tree.encode()).hexdigest()}\nparent {parent}\n{time.time_ns()} {self.counter}\n\n{title}\n{message}"
        sha = hashlib.sha1(f"commit {len(payload)}\0{payload}".encode()).hexdigest()
        commit = Commit(sha, parent, dict(files), title, message, _now())
        repo.commits[sha] = commit
        return commit

    # -- lookups -------------------------------------------------------------------------------------------------
    def repo(self, repo_id: str, authorized: bool) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not authorized):
            raise HubError(404 if repo is None else 401, f"Repository {repo_id} not found", "RepoNotFound")
        return repo

    def resolve(self, repo: Repo, revision: str) -> Commit:
        revision = unquote(revision)
        if revision in repo.branches:
            return repo.commits[repo.branches[revision]]
        if _SHA.match(revision) and revision in repo.commits:
            return repo.commits[revision]
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def create_repo(self, body: dict, authorized: bool) -> tuple[int, dict]:
        if not authorized:
            raise HubError(401, "Invalid credentials in Authorization header")
        if body.get("type", "model") != "model":
            raise HubError(400, f"only model repositories are supported, got type={body.get('type')!r}")
        name, org = body.get("name"), body.get("organization")
        if not org:
            raise HubError(400, "this server needs a namespace: use repo ids of the form 'namespace/name'")
        if not (isinstance(name, str) and _REPO_PART.match(name) and _REPO_PART.match(org)):
            raise HubError(400, f"invalid repository name {org}/{name}")
        repo_id = f"{org}/{name}"
        private = bool(body.get("private")) or body.get("visibility") == "private"
        with self.lock:
            if repo_id in self.repos:
                return 409, {"error": "You already created this model repo", "url": repo_id}
            repo = Repo(repo_id, private, _now())
            first = self.new_commit(repo, None, {".gitattributes": self.put_blob(GITATTRIBUTES)}, "initial commit", "")
            repo.branches["main"] = first.sha
            self.repos[repo_id] = repo
            self._save_refs(repo)
        return 200, {"url": repo_id, "name": repo_id, "id": repo_id}

    def commit(self, repo: Repo, revision: str, lines: list[dict]) -> Commit:
        branch = unquote(revision)
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "the first NDJSON line must be the commit header")
        header = lines[0]["value"]
        with self.lock:
            if branch not in repo.branches:
                raise HubError(404, f"Invalid rev id: {branch} (commits go to a branch)", "RevisionNotFound")
            head = repo.commits[repo.branches[branch]]
            parent = header.get("parentCommit")
            if parent is not None and parent != head.sha:
                raise HubError(412, f"parentCommit {parent} is not the head of {branch} ({head.sha})")
            files = dict(head.files)
            for line in lines[1:]:
                key, value = line.get("key"), line.get("value") or {}
                path = value.get("path", "")
                if key == "file":
                    if value.get("encoding", "base64") != "base64":
                        raise HubError(400, f"unsupported encoding {value.get('encoding')!r} for {path}")
                    files[path] = self.put_blob(base64.b64decode(value["content"]))
                elif key == "deletedFile":
                    if path not in files:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                    del files[path]
                elif key == "deletedFolder":
                    prefix = path.rstrip("/") + "/"
                    files = {p: o for p, o in files.items() if not p.startswith(prefix)}
                else:  # lfsFile and copies: this server only answers uploadMode "regular"
                    raise HubError(422, f"unsupported commit operation {key!r} (this server accepts inline files)")
            commit = self.new_commit(
                repo, head.sha, files, header.get("summary") or "update", header.get("description") or ""
            )
            repo.branches[branch] = commit.sha
            self._save_refs(repo)
        return commit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        self.server.requests.append(f"{self.command} {self.path}")

    # -- plumbing ------------------------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers)

    def _authorized(self) -> bool:
        token = self.server.state.token
        return token is None or self.headers.get("Authorization") == f"Bearer {token}"

    def _body(self) -> bytes:
        return self._request_body

    def _dispatch(self) -> None:
        # read the whole body first: an error answered early must not leave bytes on a keep-alive connection
        self._request_body = self._read_body()
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [unquote(p) for p in url.path.split("/") if p]
        try:
            self._route(self.command, parts, query)
        except HubError as exc:
            headers = {"X-Error-Message": exc.message}
            if exc.code:
                headers["X-Error-Code"] = exc.code
            self._json(exc.status, {"error": exc.message}, headers)
        except Exception as exc:  # a bug here must surface as a 500, not a hung client
            self._json(500, {"error": f"{type(exc).__name__}: {exc}"})

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    # -- routes --------------------------------------------------------------------------------------------------
    def _route(self, method: str, parts: list[str], query: dict[str, list[str]]) -> None:
        state = self.server.state
        if method == "POST" and parts == ["api", "repos", "create"]:
            status, payload = state.create_repo(json.loads(self._body() or b"{}"), self._authorized())
            if status == 200:
                payload["url"] = f"{self.server.url}/{payload['url']}"
            return self._json(status, payload)
        if method == "POST" and parts == ["api", "validate-yaml"]:
            errors = validate_card(json.loads(self._body() or b"{}").get("content", ""))
            return self._json(400 if errors else 200, {"errors": [{"message": e} for e in errors], "warnings": []})
        if method == "GET" and parts == ["api", "whoami-v2"]:
            if not self._authorized() or self.headers.get("Authorization") is None:
                raise HubError(401, "Invalid credentials in Authorization header")
            return self._json(200, {"type": "user", "name": "local-user", "orgs": [], "auth": {}})
        if len(parts) >= 4 and parts[:2] == ["api", "models"]:
            repo = state.repo(f"{parts[2]}/{parts[3]}", self._authorized())
            return self._api_repo(method, repo, parts[4:], query)
        if len(parts) >= 5 and parts[2] == "resolve" and method in ("GET", "HEAD"):
            repo = state.repo(f"{parts[0]}/{parts[1]}", self._authorized())
            return self._resolve(repo, parts[3], "/".join(parts[4:]))
        raise HubError(404, f"no route for {method} /{'/'.join(parts)}")

    def _api_repo(self, method: str, repo: Repo, rest: list[str], query: dict[str, list[str]]) -> None:
        state = self.server.state
        write = method == "POST"
        if write and not self._authorized():
            raise HubError(401, "Invalid credentials in Authorization header")
        if method == "GET" and (not rest or rest[0] == "revision"):
            commit = state.resolve(repo, rest[1] if len(rest) > 1 else "main")
            return self._json(200, self._info(repo, commit, blobs="blobs" in query))
        if method == "GET" and rest[:1] == ["tree"] and len(rest) >= 2:
            commit = state.resolve(repo, rest[1])
            return self._json(
                200,
                self._tree(
                    commit, "/".join(rest[2:]), query.get("recursive") == ["true"] or query.get("recursive") == ["True"]
                ),
            )
        if method == "GET" and rest[:1] == ["commits"] and len(rest) == 2:
            commit, history = state.resolve(repo, rest[1]), []
            while commit is not None:
                history.append(
                    {
                        "id": commit.sha,
                        "title": commit.title,
                        "message": commit.message,
                        "authors": [{"user": "local-user"}],
                        "date": commit.date,
                    }
                )
                commit = repo.commits.get(commit.parent) if commit.parent else None
            return self._json(200, history)
        if write and rest[:1] == ["preupload"] and len(rest) == 2:
            head = state.resolve(repo, rest[1])
            files = json.loads(self._body() or b"{}").get("files", [])
            return self._json(
                200,
                {
                    "files": [
                        {
                            "path": f["path"],
                            "uploadMode": "regular",
                            "shouldIgnore": False,
                            "oid": head.files.get(f["path"]),
                        }
                        for f in files
                    ]
                },
            )
        if write and rest[:1] == ["commit"] and len(rest) == 2:
            lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            commit = state.commit(repo, rest[1], lines)
            return self._json(
                200,
                {
                    "success": True,
                    "commitOid": commit.sha,
                    "pullRequestUrl": None,
                    "commitUrl": f"{self.server.url}/{repo.repo_id}/commit/{commit.sha}",
                },
            )
        if write and rest[:1] == ["branch"] and len(rest) == 2:
            body = json.loads(self._body() or b"{}")
            with state.lock:
                if rest[1] in repo.branches:
                    raise HubError(409, f"Reference already exists: {rest[1]}")
                repo.branches[rest[1]] = state.resolve(repo, body.get("startingPoint") or "main").sha
                state._save_refs(repo)
            return self._json(200, {})
        raise HubError(404, f"no route for {method} /api/models/{repo.repo_id}/{'/'.join(rest)}")

    def _info(self, repo: Repo, commit: Commit, blobs: bool) -> dict:
        siblings = []
        for path, oid in sorted(commit.files.items()):
            entry = {"rfilename": path}
            if blobs:
                entry.update(size=self.server.state.blob_path(oid).stat().st_size, blobId=oid)
            siblings.append(entry)
        return {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit.sha,
            "private": repo.private,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "createdAt": repo.created_at,
            "lastModified": commit.date,
        }

    def _tree(self, commit: Commit, path: str, recursive: bool) -> list[dict]:
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        if prefix and not any(p.startswith(prefix) for p in commit.files):
            raise HubError(404, f"{path} does not exist on this revision", "EntryNotFound")
        entries, folders = [], set()
        for file_path, oid in sorted(commit.files.items()):
            if not file_path.startswith(prefix):
                continue
            rest = file_path[len(prefix) :]
            if "/" in rest and not recursive:
                folders.add(prefix + rest.split("/")[0])
                continue
            if recursive:
                for i in range(1, rest.count("/") + 1):
                    folders.add(prefix + "/".join(rest.split("/")[:i]))
            size = self.server.state.blob_path(oid).stat().st_size
            entries.append({"type": "file", "path": file_path, "oid": oid, "size": size})
        for folder in sorted(folders):
            entries.append(
                {"type": "directory", "path": folder, "size": 0, "oid": hashlib.sha1(folder.encode()).hexdigest()}
            )
        return entries

    def _resolve(self, repo: Repo, revision: str, path: str) -> None:
        state = self.server.state
        commit = state.resolve(repo, revision)
        oid = commit.files.get(path)
        if oid is None:
            raise HubError(404, f"Entry not found: {path} at {commit.sha}", "EntryNotFound")
        data = state.blob_path(oid).read_bytes()
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{oid}"', "Accept-Ranges": "bytes"}
        status, length = 200, len(data)
        ranged = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if ranged and self.command == "GET":
            start = int(ranged.group(1))
            end = int(ranged.group(2)) if ranged.group(2) else len(data) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start : end + 1], 206
            length = len(data)
        self._send(status, data, headers, "application/octet-stream", length)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState
    url: str
    requests: list[str]


class HubServer:
    """A local Hub on 127.0.0.1 (`port` 0: a free one), storing everything under `root`. A context manager."""

    def __init__(self, root: str | Path, token: str | None = None, port: int = 0):
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.state = HubState(Path(root), token)
        self._server.requests = []
        self.url = self._server.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.token = token
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-hub", daemon=True)

    @property
    def state(self) -> HubState:
        return self._server.state

    @property
    def requests(self) -> list[str]:
        """`METHOD /path` of every request served so far."""
        return self._server.requests

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """`python tests/hub_server.py [--root DIR] [--token T] [--port N]`: serve until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description="A local Hugging Face Hub (model repos) for offline tests.")
    parser.add_argument("--root", default="local-hub", help="folder for blobs and refs (default: ./local-hub)")
    parser.add_argument("--token", help="token that writes and private reads must present (default: none needed)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    server = HubServer(args.root, args.token, args.port)
    print(f"local Hub at {server.url} (data in {Path(args.root).resolve()})", flush=True)
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        server._server.server_close()


if __name__ == "__main__":
    main()
