"""Seeds roc-validator's own HTTP cache with the RO-Crate JSON-LD context, so that
`rocrate-validator validate --offline --cache-path DIR` needs no network.

roc-validator resolves every remote document (the crate's @context included) through
one requests-cache session, and `--offline` makes that session answer from the cache
alone: a miss is reported as an error, never fetched. This writes, through the
validator's own requester and so in the cache's own format, one entry per RO-Crate
1.x context URL, whose body is the context the `rocrate` package ships
(rocrate/data/ro-crate.jsonld, the newest 1.x context; the 1.x contexts only add
terms). Nothing else is seeded, so a crate that needs any other remote resource
fails offline instead of passing by luck.

Usage, with the Python of a venv holding roc-validator and rocrate:
    python rocv_context_cache.py DIR
then
    rocrate-validator -y validate --offline --cache-path DIR -p PROFILE ... CRATE
Prints the URLs it seeded, one per line."""
import importlib.resources
import io
import json
import sys

import requests
import urllib3
from rocrate_validator.utils.http import HttpRequester

CONTEXTS = [f"https://w3id.org/ro/crate/{v}/context" for v in ("1.1", "1.2", "1.3")]


def response(url: str, body: bytes) -> requests.Response:
    r = requests.Response()
    r.status_code, r.reason, r.url, r._content = 200, "OK", url, body
    r.encoding = "utf-8"
    r.headers["Content-Type"] = "application/ld+json"
    # What requests-cache copies a response's status and body from.
    r.raw = urllib3.HTTPResponse(
        body=io.BytesIO(body), headers=dict(r.headers), status=200, reason="OK",
        preload_content=False, request_url=url,
    )
    r.request = requests.Request("GET", url).prepare()
    return r


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = importlib.resources.files("rocrate").joinpath("data/ro-crate.jsonld").read_bytes()
    if "@context" not in json.loads(text):
        print("rocrate/data/ro-crate.jsonld holds no @context", file=sys.stderr)
        return 1
    cache = HttpRequester.initialize_cache(cache_path=argv[1], cache_max_age=-1).session.cache
    for url in CONTEXTS:
        cache.save_response(response(url, text))
        if not cache.contains(url=url):
            print(f"the cache did not keep {url}", file=sys.stderr)
            return 1
        print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
