#!/usr/bin/env python3
"""Validate a JUnit XML file against an XSD and read it back with junitparser, the
way CI test reporters read it: `python3 junit_check.py SCHEMA.xsd REPORT.xml`.

Prints one JSON object: the suites junitparser found, each with its counts and its
cases (name, classname, time, and the failure, error or skipped result with its
message). Exits 1, with lxml's error log, when the file does not validate.

The schema is Jenkins' junit-10.xsd as pytest's source distribution ships it
(testing/example_scripts/junit-10.xsd): .ci/run fetches it from PyPI, where CI test
reporters' JUnit dialect is kept, and passes its path in ORCHESTRATE_JUNIT_XSD."""

import json
import sys

from lxml import etree
from junitparser import JUnitXml, TestSuite


def main(xsd, report):
    schema = etree.XMLSchema(etree.parse(xsd))
    doc = etree.parse(report)
    if not schema.validate(doc):
        for e in schema.error_log:
            print(f"{e.line}:{e.column}: {e.message}", file=sys.stderr)
        return 1
    xml = JUnitXml.fromfile(report)
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    out = {"name": getattr(xml, "name", None), "suites": []}
    for s in suites:
        cases = []
        for c in s:
            cases.append(
                {
                    "name": c.name,
                    "classname": c.classname,
                    "time": c.time,
                    "result": [
                        {"kind": type(r).__name__.lower(), "message": r.message, "text": r.text}
                        for r in c.result
                    ],
                }
            )
        out["suites"].append(
            {
                "name": s.name,
                "tests": s.tests,
                "failures": s.failures,
                "errors": s.errors,
                "skipped": s.skipped,
                "time": s.time,
                "cases": cases,
            }
        )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
