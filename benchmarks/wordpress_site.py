"""A throwaway WordPress site on 127.0.0.1 for benchmarks/wordpress_story.py.

Debian's WordPress (/usr/share/wordpress) and its default theme, on MariaDB in a temp
datadir, php-fpm behind nginx. Debian's own wp-config.php reads /etc/wordpress, so the
site runs from a temp root instead: WordPress's top-level files copied (ABSPATH is the
folder of wp-load.php), wp-admin and wp-includes linked, our own wp-config.php and
wp-content. Content changes go through WordPress's own PHP functions (``change``),
dated in the story's time by a ``wp_insert_post_data`` filter: WordPress stamps an
edit with the machine's clock otherwise, and the story's clock is not the machine's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

WORDPRESS = Path("/usr/share/wordpress")
THEME = "twentytwentythree"
PHP_MODULES = (("mysqli", "php-mysql"), ("SimpleXML", "php-xml"))
THEMES = (WORDPRESS / "wp-content/themes", Path("/var/lib/wordpress/wp-content/themes"))

# Changes as WordPress's own functions make them; one JSON list of operations on stdin.
CHANGE_PHP = r"""<?php
$_SERVER['HTTP_HOST'] = getenv('STORY_HOST');
require getenv('STORY_ROOT') . '/wp-load.php';
$story_now = null;  // the operation's time, 'Y-m-d H:i:s' UTC (the site's zone is UTC)
add_filter('wp_insert_post_data', function ($data) use (&$story_now) {
    $data['post_modified'] = $data['post_modified_gmt'] = $story_now;
    return $data;
});
function story_id($slug) {
    $post = get_page_by_path($slug, OBJECT, ['post', 'page']);
    if (!$post) { fwrite(STDERR, "no post $slug\n"); exit(1); }
    return $post->ID;
}
$done = [];
foreach (json_decode(stream_get_contents(STDIN), true) as $op) {
    $story_now = $op['at'];
    switch ($op['op']) {
    case 'publish':
        $id = wp_insert_post(['post_type' => $op['type'], 'post_status' => 'publish',
            'post_name' => $op['slug'], 'post_title' => $op['title'],
            'post_content' => $op['content'], 'post_author' => 1,
            'post_category' => array_map(fn($c) => get_category_by_slug($c)->term_id,
                                        $op['categories']),
            'post_date' => $op['at'], 'post_date_gmt' => $op['at']], true);
        break;
    case 'edit':
        $id = story_id($op['slug']);
        $id = wp_update_post(['ID' => $id,
            'post_content' => get_post($id)->post_content . $op['content']], true);
        break;
    case 'comment':
        $id = wp_insert_comment(['comment_post_ID' => story_id($op['slug']),
            'comment_author' => $op['author'], 'comment_author_email' => '',
            'comment_content' => $op['content'], 'comment_approved' => 1,
            'comment_date' => $op['at'], 'comment_date_gmt' => $op['at']]);
        break;
    case 'trash':
        $id = wp_trash_post(story_id($op['slug'])) ? 1 : 0;
        break;
    case 'category':
        $id = wp_insert_term($op['title'], 'category', ['slug' => $op['slug']]);
        $id = is_wp_error($id) ? $id : $id['term_id'];
        break;
    }
    if (is_wp_error($id) || !$id) { fwrite(STDERR, json_encode([$op, $id]) . "\n"); exit(1); }
    $done[] = is_object($id) ? $id->ID : $id;
}
echo json_encode($done);
"""

INSTALL_PHP = r"""<?php
define('WP_INSTALLING', true);
$_SERVER['HTTP_HOST'] = getenv('STORY_HOST');
require getenv('STORY_ROOT') . '/wp-load.php';
require ABSPATH . 'wp-admin/includes/upgrade.php';
wp_install('A WordPress story', 'admin', 'admin@example.invalid', true, '', 'not-a-secret');
global $wp_rewrite;
$wp_rewrite->set_permalink_structure('/%postname%/');
// Not flushed here: while installing, the rules lack the taxonomies' (a category's
// archive answered 404). Made again in full by the first request.
delete_option('rewrite_rules');
update_option('timezone_string', 'UTC');
// The installer's own post, page and comment are dated by the machine's clock.
foreach (get_posts(['post_type' => 'any', 'post_status' => 'any']) as $post)
    wp_delete_post($post->ID, true);
echo get_option('home');
"""

FASTCGI = {
    "SCRIPT_FILENAME": "document_root$fastcgi_script_name",
    "SCRIPT_NAME": "fastcgi_script_name",
    "QUERY_STRING": "query_string",
    "REQUEST_METHOD": "request_method",
    "CONTENT_TYPE": "content_type",
    "CONTENT_LENGTH": "content_length",
    "REQUEST_URI": "request_uri",
    "DOCUMENT_URI": "document_uri",
    "DOCUMENT_ROOT": "document_root",
    "SERVER_PROTOCOL": "server_protocol",
    "REQUEST_SCHEME": "scheme",
    "REMOTE_ADDR": "remote_addr",
    "REMOTE_PORT": "remote_port",
    "SERVER_ADDR": "server_addr",
    "SERVER_PORT": "server_port",
    "SERVER_NAME": "server_name",
}

# Mail is not sent from a benchmark (wp_install mails the admin).
QUIET_PLUGIN = "<?php\nfunction wp_mail() { return true; }\n"

# <lastmod> as WordPress 6.5 writes it: each post's modified date, and the home page's
# the newest modified date among the posts it lists.
DATES_PLUGIN = r"""<?php
add_filter('wp_sitemaps_posts_entry', function ($entry, $post) {
    $entry['lastmod'] = get_post_modified_time('c', true, $post);
    return $entry;
}, 10, 2);
add_filter('wp_sitemaps_posts_show_on_front_entry', function ($entry) {
    $latest = get_posts(['post_type' => 'post', 'numberposts' => get_option('posts_per_page')]);
    if ($latest) {
        $latest = wp_list_sort($latest, 'post_modified_gmt', 'DESC');
        $entry['lastmod'] = get_post_modified_time('c', true, $latest[0]);
    }
    return $entry;
});
"""


def missing() -> str | None:
    """Why this machine cannot run the site, or None."""
    needs = {
        "nginx": shutil.which("nginx") or shutil.which("/usr/sbin/nginx"),
        "php": shutil.which("php"),
        "php-fpm": php_fpm(),
        "mariadbd": shutil.which("mariadbd") or shutil.which("/usr/sbin/mariadbd"),
        "mariadb-install-db": shutil.which("mariadb-install-db"),
        "WordPress (Debian's wordpress)": (WORDPRESS / "wp-settings.php").exists() or None,
        f"its theme (wordpress-theme-{THEME})": theme_dir(),
    }
    absent = [name for name, found in needs.items() if not found]
    if not absent:  # the core sitemap needs SimpleXML, else it answers 501
        modules = subprocess.run(["php", "-m"], capture_output=True, text=True).stdout.split()
        absent += [f"PHP's {m} ({package})" for m, package in PHP_MODULES if m not in modules]
    return ", ".join(absent) + " not installed" if absent else None


def php_fpm() -> str | None:
    found = sorted(Path("/usr/sbin").glob("php-fpm*"))
    return shutil.which("php-fpm") or (str(found[-1]) if found else None)


def theme_dir() -> Path | None:
    return next((d / THEME for d in THEMES if (d / THEME / "theme.json").exists()), None)


def wait_for(condition, what: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start ({process.args[0]})")
        time.sleep(0.2)


@contextlib.contextmanager
def mariadb(work: Path) -> Iterator[Path]:
    """MariaDB in a temp datadir, a database ``wp`` for user ``wp``; yields its socket."""
    data, sock = work / "data", work / "db.sock"
    root = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={data}", *root,
         "--auth-root-authentication-method=socket", "--skip-test-db"],
        capture_output=True, check=True, timeout=300,
    )  # fmt: skip
    from tests.support.ports import free_port

    process = subprocess.Popen(
        [shutil.which("mariadbd") or "/usr/sbin/mariadbd", "--no-defaults", *root,
         f"--datadir={data}", f"--socket={sock}", f"--port={free_port()}",
         "--bind-address=127.0.0.1", f"--pid-file={work / 'db.pid'}",
         f"--log-error={work / 'db.log'}", "--skip-log-bin", "--innodb-buffer-pool-size=64M"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(sock.exists, "MariaDB", process)
        sql = "CREATE DATABASE wp; CREATE USER wp@localhost IDENTIFIED BY 'wp'; "
        sql += "GRANT ALL ON wp.* TO wp@localhost;"
        subprocess.run(["mariadb", f"--socket={sock}", "-uroot", "-e", sql], check=True)
        yield sock
    finally:
        process.terminate()
        process.wait(timeout=60)


@contextlib.contextmanager
def fpm(work: Path) -> Iterator[Path]:
    """php-fpm with two workers on a unix socket; yields the socket."""
    sock = work / "fpm.sock"
    user = "user = root\n" if os.geteuid() == 0 else ""
    (work / "fpm.conf").write_text(
        f"[global]\npid = {work / 'fpm.pid'}\nerror_log = {work / 'fpm.log'}\n"
        f"daemonize = no\n[story]\n{user}listen = {sock}\npm = static\n"
        "pm.max_children = 2\nclear_env = no\ncatch_workers_output = yes\n"
    )
    command = [php_fpm(), "--nodaemonize", "--fpm-config", str(work / "fpm.conf")]
    process = subprocess.Popen(command + (["-R"] if user else []), stderr=subprocess.DEVNULL)
    try:
        wait_for(sock.exists, "php-fpm", process)
        yield sock
    finally:
        process.terminate()
        process.wait(timeout=30)


def wordpress_root(root: Path, db_sock: Path, url: str, dates: bool) -> None:
    """Debian's WordPress as a site of its own in *root* (see the module's docstring)."""
    root.mkdir()
    for entry in WORDPRESS.iterdir():
        if entry.name in ("wp-admin", "wp-includes"):
            (root / entry.name).symlink_to(entry)
        elif entry.suffix == ".php" and entry.name != "wp-config.php":
            shutil.copy(entry, root)
    content = root / "wp-content"
    (content / "themes").mkdir(parents=True)
    (content / "themes" / THEME).symlink_to(theme_dir())
    (content / "plugins").mkdir()
    (content / "mu-plugins").mkdir()
    (content / "mu-plugins/quiet.php").write_text(QUIET_PLUGIN)
    if dates:
        (content / "mu-plugins/lastmod.php").write_text(DATES_PLUGIN)
    constants = {
        "DB_NAME": "'wp'", "DB_USER": "'wp'", "DB_PASSWORD": "'wp'",
        "DB_HOST": f"'localhost:{db_sock}'", "WP_HOME": f"'{url}'", "WP_SITEURL": f"'{url}'",
        "WP_CONTENT_DIR": f"'{content}'", "ABSPATH": "__DIR__ . '/'",
        # No cron run by page views, no updates, no requests beyond 127.0.0.1.
        "DISABLE_WP_CRON": "true", "AUTOMATIC_UPDATER_DISABLED": "true",
        "WP_HTTP_BLOCK_EXTERNAL": "true",
    }  # fmt: skip
    (root / "wp-config.php").write_text(
        "<?php\n"
        + "".join(f"define('{name}', {value});\n" for name, value in constants.items())
        + "$table_prefix = 'wp_';\nrequire_once ABSPATH . 'wp-settings.php';\n"
    )


class WordPressSite:
    """The running site: its URL, nginx's access log and its PHP."""

    def __init__(self, url: str, access: Path, root: Path) -> None:
        self.url, self.access, self.root = url, access, root

    def php(self, script: str, stdin: str = "") -> str:
        path = self.root.parent / "story.php"
        path.write_text(script)
        env = {**os.environ, "STORY_ROOT": str(self.root), "STORY_HOST": self.url[7:]}
        done = subprocess.run(
            ["php", str(path)], input=stdin, env=env, capture_output=True, text=True, timeout=600
        )
        if done.returncode:
            raise RuntimeError(f"WordPress said: {done.stderr[-2000:]}{done.stdout[-2000:]}")
        return done.stdout

    def change(self, operations: list[dict]) -> list:
        """Apply operations (see CHANGE_PHP) in order through WordPress's functions."""
        return json.loads(self.php(CHANGE_PHP, json.dumps(operations)) or "[]")

    def sitemap_urls(self) -> list[str]:
        """The URLs of the core sitemap (/wp-sitemap.xml and its sitemaps)."""

        def locs(url: str) -> list[str]:
            with urllib.request.urlopen(url, timeout=60) as answer:  # loopback only
                return re.findall(r"<loc>([^<]+)</loc>", answer.read().decode())

        return [url for sitemap in locs(self.url + "/wp-sitemap.xml") for url in locs(sitemap)]


@contextlib.contextmanager
def wordpress_site(work: Path, dates: bool = False) -> Iterator[WordPressSite]:
    """Debian's WordPress, installed, with pretty permalinks, served on 127.0.0.1."""
    from tests.support.nginx import nginx
    from tests.support.ports import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The request's own headers reach PHP as they are (its Host with the port): the
    # system's fastcgi_params may set HTTP_HOST to $host, and WordPress then redirects
    # every page to itself with the port.
    params = "".join(f"fastcgi_param {name} ${value}; " for name, value in FASTCGI.items())
    php = (
        "index index.php; location / { try_files $uri $uri/ /index.php?$args; } "
        f"location ~ \\.php$ {{ {params}fastcgi_pass unix:%s; }}"
    )
    with mariadb(work) as db_sock, fpm(work) as fpm_sock:
        wordpress_root(work / "wp", db_sock, url, dates)
        with nginx(work / "wp", work / "nginx", port=port, extra=php % fpm_sock) as (_, log):
            site = WordPressSite(url, log, work / "wp")
            site.php(INSTALL_PHP)
            yield site
