#!/usr/bin/env python3
"""Seeds corpus/sql_script/ with the SQL the documentation prints: every ```sql block and every
`kafluss sql -e "..."` statement of README.md and docs/*.md."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent.parent
out = pathlib.Path(__file__).resolve().parent / "corpus" / "sql_script"
out.mkdir(parents=True, exist_ok=True)
count = 0
for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    text = doc.read_text()
    for sql in re.findall(r"```sql\n(.*?)```", text, re.S) + re.findall(r'-e "([^"]+)"', text):
        count += 1
        (out / f"doc-{count}.sql").write_text(sql)
print(f"{count} seeds in {out}")
