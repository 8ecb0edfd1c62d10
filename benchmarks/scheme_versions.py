"""Do the converters' minor versions change a page's text? What a scheme change costs.

    pip install --no-deps --target LIBS/h2m-3.20.0 html-to-markdown==3.20.0   # each version
    python benchmarks/scheme_versions.py LIBS/h2m-3.19.0 LIBS/traf-2.2.0 ...

The text scheme (``ContentOptions.scheme``) names the versions of html-to-markdown and
trafilatura: any upgrade marks every fingerprint old and the next run re-reads every
page whole. Would a scheme that moves only when the text of a fixed set of sample pages
moves be cheaper, and still exact? Each version given (a ``--target`` folder, first on
``sys.path``) takes the text of every page of a corpus of real generators' HTML found on
this machine (rustdoc, mdBook, Node's and npm's docs, DocBook, gtk-doc, ...); the pages
whose text differs from the installed versions' are counted, and whether a small fixed
sample (the first pages of each source) would have seen the move.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section

#: Folders of real generators' HTML (present on the machines these run on).
RUST = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
SOURCES = {
    "rustdoc (std)": f"{RUST}/std",
    "mdBook (the Rust book)": f"{RUST}/book",
    "Node.js docs": "/usr/share/doc/nodejs",
    "npm docs": "/usr/lib/node_modules/npm/docs",
    "DocBook (valgrind)": "/usr/share/doc/valgrind",
    "gtk-doc (libxslt)": "/usr/share/doc/libxslt1-dev",
    "kramdown docs": "/usr/share/doc/ruby-kramdown",
    "Google Cloud SDK": "/usr/lib/google-cloud-sdk/platform",
}
PER_SOURCE = 60  # pages of each source, spread over its files
SAMPLE = 2  # pages of each source in the fixed sample
READING = (
    "\n\nReading: a scheme naming html-to-markdown's version re-read every page at each minor "
    "upgrade here (3.19 to 3.20 to 3.21), for no text that moved; named by its samples' text "
    "it re-reads none. trafilatura's releases each moved extracted text (its patch 2.3.1 "
    "too), so its whole version stays in the scheme: a release re-reads every page once, "
    "in the next run."
)


def corpus() -> dict[str, list[str]]:
    found = {}
    for name, folder in SOURCES.items():
        files = sorted(
            str(p) for p in Path(folder).rglob("*.html") if p.is_file() and p.stat().st_size > 2048
        )
        if files:
            step = max(1, len(files) // PER_SOURCE)
            found[name] = files[::step][:PER_SOURCE]
    return found


def worker(paths: list[str]) -> None:
    from importlib.metadata import version

    from increcrawl_scrapy.content.page_text import ContentOptions, page_text

    options = ContentOptions()
    digests = {}
    for path in paths:
        body = Path(path).read_bytes()
        text = page_text(body, "text/html", body.decode("utf-8", "replace"), options)
        digests[path] = [hashlib.sha256(text.text.encode()).hexdigest(), text.how]
    versions = {name: version(name) for name in ("html-to-markdown", "trafilatura")}
    scheme = options.scheme()  # what the state stores: moves when the samples' text does
    print(json.dumps({"versions": versions, "digests": digests, "scheme": scheme}))


def measure(libs: str | None, paths_file: Path) -> dict:
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([*([libs] if libs else []), repo])
    done = subprocess.run(
        [sys.executable, __file__, "--worker", str(paths_file)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=3600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(libs: list[str]) -> None:
    import tempfile

    pages = corpus()
    source_of = {path: name for name, paths in pages.items() for path in paths}
    sample = {path for paths in pages.values() for path in paths[:SAMPLE]}
    with tempfile.TemporaryDirectory() as tmp:
        paths_file = Path(tmp) / "paths.json"
        paths_file.write_text(json.dumps(sorted(source_of)))
        installed = measure(None, paths_file)
        rows = []
        for folder in libs:
            other = measure(folder, paths_file)
            moved = [
                p
                for p, (digest, _) in installed["digests"].items()
                if other["digests"][p][0] != digest
            ]
            hows = Counter(installed["digests"][p][1] for p in moved)
            sources = Counter(source_of[p] for p in moved)
            seen = bool(sample & set(moved))
            name = next(
                f"{n} {other['versions'][n]}"
                for n in ("html-to-markdown", "trafilatura")
                if other["versions"][n] != installed["versions"][n]
            )
            rows.append(
                [
                    name,
                    f"{len(moved)} of {len(source_of)}",
                    ", ".join(f"{s}: {c}" for s, c in sources.most_common()) or "-",
                    ", ".join(f"{h}: {c}" for h, c in hows.most_common()) or "-",
                    ("yes" if seen else "no") if moved else "nothing to see",
                    "moves" if other["scheme"] != installed["scheme"] else "same",
                ]
            )
    hows = Counter(how for _, how in installed["digests"].values())
    body = (
        f"Installed: html-to-markdown {installed['versions']['html-to-markdown']}, "
        f"trafilatura {installed['versions']['trafilatura']}. Corpus: {len(source_of)} pages "
        f"of {len(pages)} generators found on this machine ({', '.join(pages)}); their main "
        f"content found by {', '.join(f'{h} {c}' for h, c in hows.most_common())}. A fixed "
        f"sample: the first {SAMPLE} pages of each source ({len(sample)} pages). Text scheme: "
        f"whether ``ContentOptions.scheme`` moves (the markdown converter's samples' text, "
        f"trafilatura's version), i.e. whether the next run re-reads every page.\n\n"
        + table(
            [
                "other version",
                "pages whose text differs",
                "by source",
                "by how the content was found",
                "sample sees it",
                "text scheme",
            ],
            rows,
        )
        + READING
    )
    write_section("Text scheme: what a converter's version changes", body)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main(sys.argv[1:])
