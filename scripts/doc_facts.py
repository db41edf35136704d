#!/usr/bin/env python3
"""Checks that the facts of an old document are still findable in README.md and docs/*.md.

    git show REV:README.md > /tmp/old.md
    python3 scripts/doc_facts.py /tmp/old.md [--verbose]

Each sentence (or table row, or code line) of the old text is reduced to its key terms: code
spans, flags (`--foo`), environment variables (SAMPLAB_*, HF_*, ...), numbers and file paths.
A sentence whose terms all appear somewhere in README.md + docs/*.md passes; one that loses a
term is printed with the terms it lost. Sentences that appear verbatim pass at once. Exit 1
when any sentence lost a term. Standard library only.
"""

import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def normalise(text):
    return re.sub(r"\s+", " ", text.replace("\\|", "|"))


def units(text):
    """Sentences of prose, rows of tables, lines of code blocks."""
    out = []
    paragraph = []
    code = False

    def flush():
        if paragraph:
            prose = " ".join(line.strip() for line in paragraph)
            # Split after a full stop, question or colon-free end, before a capital or a code span.
            for sentence in re.split(r"(?<=[.;])\s+(?=[A-Z`(\[])", prose):
                if sentence.strip():
                    out.append(sentence.strip())
            paragraph.clear()

    for line in text.split("\n"):
        if line.startswith("```"):
            flush()
            code = not code
            continue
        if code or line.startswith("|"):
            flush()
            if line.strip() and not re.match(r"^\|[-| ]+\|$", line):
                out.append(line.strip())
            continue
        if not line.strip() or line.startswith("#"):
            flush()
            continue
        if re.match(r"^\s*[-*] ", line):
            flush()
            line = re.sub(r"^\s*[-*] ", "", line)
        paragraph.append(line)
    flush()
    return out


TERM_PATTERNS = [
    r"`([^`]+)`",  # code spans
    r"(?<![\w-])(--[a-z][a-z0-9-]*)",  # flags
    r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b",  # environment variables
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?(?:[-–]\d[\d,]*(?:\.\d+)?)?(?:x|%| ?[KMG]i?B| GB/s| tok/s| ms| s\b)?)",  # numbers
    r"\b((?:src|tests|scripts|benches|themes|docs)/[\w./-]+)",  # paths
]


def terms(sentence):
    found = []
    for pattern in TERM_PATTERNS:
        for m in re.finditer(pattern, sentence):
            t = m.group(1).strip()
            if len(t) >= 2 or t.isdigit():
                found.append(t)
    return found


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    old = open(sys.argv[1], encoding="utf-8").read()
    verbose = "--verbose" in sys.argv
    corpus_files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    corpus = normalise("\n".join(open(f, encoding="utf-8").read() for f in corpus_files))
    lost_any = 0
    checked = 0
    for unit in units(old):
        sentence = normalise(unit)
        wanted = terms(sentence)
        if not wanted:
            continue
        checked += 1
        if sentence in corpus:
            continue
        lost = [t for t in dict.fromkeys(wanted) if normalise(t) not in corpus]
        if lost:
            lost_any += 1
            print(f"LOST {lost}: {sentence[:200]}")
        elif verbose:
            print(f"moved: {sentence[:120]}")
    print(f"{checked} sentences with key terms checked; {lost_any} lost a term")
    return 1 if lost_any else 0


if __name__ == "__main__":
    sys.exit(main())
