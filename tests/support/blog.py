"""A blog built by Hugo, for tests and benchmarks of listing pages (issue #50, 12):
posts dated one a day, newest first on a paginated home page, a paginated ``/posts/``
section and ``/tags/`` with a paginated page per tag. A post links its tags and the
posts before and after it, never every post: only the listings list them all, as on
a WordPress site. Serve ``out`` with any web server (the tests use nginx)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

#: Posts a listing page shows; tags, one a post in turn.
PER_PAGE, TAGS = 5, 4
_START = datetime(2026, 1, 1, tzinfo=timezone.utc)  # before the machine's clock: built

_BASE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>{{ .Title }}</title></head>
<body><header><a href="/">Home</a> <a href="/posts/">Posts</a> <a href="/tags/">Tags</a></header>
<main>{{ block "main" . }}{{ end }}</main><footer>Example blog</footer></body></html>
"""
_SINGLE = """{{ define "main" }}<article><h1>{{ .Title }}</h1>{{ .Content }}
<p class="tags">{{ range .Params.tags }}<a href="/tags/{{ . | urlize }}/">{{ . }}</a> {{ end }}</p>
<nav>{{ with .PrevInSection }}<a href="{{ .RelPermalink }}">Older</a>{{ end }}
{{ with .NextInSection }}<a href="{{ .RelPermalink }}">Newer</a>{{ end }}</nav></article>{{ end }}
"""
_PAGER = """<ul>{{ range $pager.Pages }}
<li><a href="{{ .RelPermalink }}">{{ .Title }}</a></li>{{ end }}</ul>
<nav>{{ with $pager.Prev }}<a href="{{ .URL }}">Previous</a>{{ end }}
{{ with $pager.Next }}<a href="{{ .URL }}">Next</a>{{ end }}</nav>{{ end }}
"""
_LIST = '{{ define "main" }}<h2>{{ .Title }}</h2>{{ $pager := .Paginate .Pages }}' + _PAGER
_HOME = (
    '{{ define "main" }}<h2>Latest</h2>'
    '{{ $pager := .Paginate (where .Site.RegularPages "Section" "posts") }}' + _PAGER
)


@dataclass
class Post:
    number: int
    text: str
    edits: int = 0

    @property
    def slug(self) -> str:
        return f"post-{self.number:03d}"


class HugoBlog:
    def __init__(self, workdir: Path, base_url: str, posts: int = 30) -> None:
        self.src, self.out = workdir / "src", workdir / "out"
        self.base_url = base_url.rstrip("/")
        self.posts: dict[str, Post] = {}
        self.made = 0
        for _ in range(posts):
            self.add()

    def add(self) -> str:
        """A new post, the newest: first on the home page, every listing moves."""
        self.made += 1
        post = Post(self.made, f"The text of post {self.made}, as its author wrote it.")
        self.posts[post.slug] = post
        return post.slug

    def edit(self, slug: str) -> None:
        post = self.posts[slug]
        post.edits += 1
        post.text = f"The text of post {post.number}, revision {post.edits}."

    def delete(self, slug: str) -> None:
        del self.posts[slug]

    def url_of(self, slug: str) -> str:
        return f"{self.base_url}/posts/{slug}/"

    def truth(self) -> dict[str, str]:
        """Each post's URL and its text: what a full crawl's items show."""
        return {self.url_of(slug): post.text for slug, post in self.posts.items()}

    def build(self) -> None:
        shutil.rmtree(self.src, ignore_errors=True)
        posts = self.src / "content" / "posts"
        posts.mkdir(parents=True)
        for slug, post in self.posts.items():
            date = (_START + timedelta(days=post.number)).isoformat()
            tag = f"tag-{post.number % TAGS}"
            (posts / f"{slug}.md").write_text(
                f'---\ntitle: "Post {post.number}"\ndate: {date}\ntags: ["{tag}"]\n---\n\n'
                f"{post.text}\n"
            )
        layouts = self.src / "layouts"
        (layouts / "_default").mkdir(parents=True)
        (layouts / "_default" / "baseof.html").write_text(_BASE)
        (layouts / "_default" / "single.html").write_text(_SINGLE)
        (layouts / "_default" / "list.html").write_text(_LIST)
        (layouts / "index.html").write_text(_HOME)
        (self.src / "config.toml").write_text(
            f'baseURL = "{self.base_url}/"\ntitle = "Example blog"\npaginate = {PER_PAGE}\n'
            'disableKinds = ["RSS"]\n[taxonomies]\ntag = "tags"\n'
        )
        shutil.rmtree(self.out, ignore_errors=True)
        subprocess.run(
            ["hugo", "--quiet", "-d", str(self.out)],
            cwd=self.src,
            check=True,
            capture_output=True,
            timeout=300,
        )
