"""Check the signatures of presigned S3 requests with botocore's SigV4, an
implementation independent of the one that made them.

stdin: a JSON list of {"method", "target", "headers": [[name, value], ...]} as
the requests went on the wire; argv: the key id and the secret. Prints one line
per request: "ok METHOD PATH" or "mismatch METHOD PATH: ...".
"""

import json
import sys
from urllib.parse import urlsplit

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def check(r, key, secret):
    headers = {k.lower(): v.strip() for k, v in r["headers"]}
    parts = urlsplit("http://" + headers["host"] + r["target"])
    query = [p for p in parts.query.split("&") if p]
    given = dict(p.split("=", 1) for p in query)
    sig = given["X-Amz-Signature"]
    scope = given["X-Amz-Credential"].split("%2F")
    if scope[0] != key:
        return f"mismatch {r['method']} {parts.path}: key id {scope[0]}"
    signed = given["X-Amz-SignedHeaders"].replace("%3B", ";").split(";")
    unsigned = "&".join(p for p in query if not p.startswith("X-Amz-Signature="))
    url = f"http://{headers['host']}{parts.path}?{unsigned}"
    req = AWSRequest(
        method=r["method"],
        url=url,
        headers={h: headers[h] for h in signed if h != "host"},
    )
    req.context["timestamp"] = given["X-Amz-Date"]
    auth = S3SigV4QueryAuth(
        Credentials(key, secret), "s3", scope[2], expires=int(given["X-Amz-Expires"])
    )
    want = auth.signature(auth.string_to_sign(req, auth.canonical_request(req)), req)
    where = f"{r['method']} {parts.path}"
    return f"ok {where}" if want == sig else f"mismatch {where}: signed {signed}"


def main():
    key, secret = sys.argv[1], sys.argv[2]
    for r in json.load(sys.stdin):
        print(check(r, key, secret))


if __name__ == "__main__":
    main()
