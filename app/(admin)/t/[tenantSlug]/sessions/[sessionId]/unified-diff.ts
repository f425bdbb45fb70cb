/** One line of a unified diff as the diff view draws it, with its numbers in the old and new file. */
export type DiffLine =
  | { kind: "hunk"; text: string }
  | { kind: "context" | "added" | "removed"; text: string; oldLine: number | null; newLine: number | null }
  | { kind: "note"; text: string };

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/**
 * The lines of `checkpoint.fileDiff`'s patch (jsdiff's `createTwoFilesPatch`), numbered. The file headers
 * before the first hunk (`Index:`, `===`, `---`, `+++`) are dropped: the dialog names the file already,
 * and a removed line that reads `--- x` must not be taken for a header once hunks have begun.
 */
export function parseUnifiedDiff(patch: string): DiffLine[] {
  const lines: DiffLine[] = [];
  let oldLine = 0;
  let newLine = 0;
  let inHunk = false;
  const rows = patch.split("\n");
  // The patch ends with a newline: its last "line" is empty, not a context line.
  if (rows.at(-1) === "") rows.pop();
  for (const row of rows) {
    const hunk = HUNK.exec(row);
    if (hunk) {
      inHunk = true;
      oldLine = Number(hunk[1]);
      newLine = Number(hunk[2]);
      lines.push({ kind: "hunk", text: row });
      continue;
    }
    if (!inHunk) continue;
    const text = row.slice(1);
    const mark = row.charAt(0);
    if (mark === "+") lines.push({ kind: "added", text, oldLine: null, newLine: newLine++ });
    else if (mark === "-") lines.push({ kind: "removed", text, oldLine: oldLine++, newLine: null });
    else if (mark === "\\") lines.push({ kind: "note", text: row.slice(2) });
    else lines.push({ kind: "context", text, oldLine: oldLine++, newLine: newLine++ });
  }
  return lines;
}

/** A size for people: bytes up to a KiB, then KiB, MiB, GiB to a tenth. */
export function formatBytes(value: number): string {
  if (value < 1024) return `${value} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let scaled = value / 1024;
  let unit = 0;
  while (scaled >= 1024 && unit < units.length - 1) {
    scaled /= 1024;
    unit += 1;
  }
  return `${Math.round(scaled * 10) / 10} ${units[unit]}`;
}
