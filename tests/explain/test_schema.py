#!/usr/bin/env python3
"""The dump writer's output and docs/dump-sample.json validate against
docs/dump.schema.json, and the schema rejects what the reader rejects.
usage: test_schema.py MAKE_SAMPLE SCHEMA SAMPLE [ARENA_DUMP_TEST]   (exit 77: skipped)
ARENA_DUMP_TEST (explain_arena_dump) writes real arena dumps to validate too."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("vramshim: python3-jsonschema is not installed; skipping")
    sys.exit(77)


def main():
    make_sample, schema_path, sample_path = sys.argv[1:4]
    arena_test = sys.argv[4] if len(sys.argv) > 4 else None
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    with tempfile.TemporaryDirectory() as tmp:
        docs = []
        for args in ([], ["--day60"]):
            out = os.path.join(tmp, "d%d.json" % len(docs))
            subprocess.run([make_sample, out] + args, check=True)
            with open(out) as f:
                docs.append(json.load(f))
        with open(sample_path) as f:
            docs.append(json.load(f))
        if arena_test:
            stem = os.path.join(tmp, "arena")
            subprocess.run([arena_test], check=True, env=dict(os.environ, EXPLAIN_ARENA_DUMP=stem),
                           stdout=subprocess.DEVNULL)
            for mode in ("chunks", "vmm"):
                with open("%s-%s.json" % (stem, mode)) as f:
                    docs.append(json.load(f))
            assert any(r["kind"] == "slab" for r in docs[-1]["cards"][0]["regions"])
    for d in docs:
        errors = list(v.iter_errors(d))
        assert not errors, [e.message for e in errors]
    # The committed sample is what the writer produces today.
    assert docs[0] == docs[2], "docs/dump-sample.json is stale: regenerate it with explain_make_sample"
    # The schema is not vacuous: broken documents fail it.
    bad = json.loads(json.dumps(docs[0]))
    bad["cards"][0]["regions"][0]["blocks"][0]["state"] = "gone"
    assert not v.is_valid(bad)
    bad = json.loads(json.dumps(docs[0]))
    del bad["cards"][0]["largest_free"]
    assert not v.is_valid(bad)
    bad = json.loads(json.dumps(docs[0]))
    bad["schema_version"] = "2.0"
    assert not v.is_valid(bad)
    bad = json.loads(json.dumps(docs[0]))
    bad["cards"][0]["live_bytes"] = -1
    assert not v.is_valid(bad)
    # A later minor version with a new field stays valid.
    newer = json.loads(json.dumps(docs[0]))
    newer["schema_version"] = "1.4"
    newer["cards"][0]["something_new"] = {"x": 1}
    assert v.is_valid(newer)
    print("vramshim: %d dumps valid against the schema" % len(docs))


if __name__ == "__main__":
    main()
