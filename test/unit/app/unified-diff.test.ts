import { createTwoFilesPatch } from "diff";
import { describe, expect, it } from "vitest";
import {
  formatBytes,
  parseUnifiedDiff,
} from "@/app/(admin)/t/[tenantSlug]/sessions/[sessionId]/unified-diff";

/** The diff view's lines, as `checkpoint.fileDiff` makes its patches (jsdiff, three lines of context). */
const patch = (before: string, after: string) =>
  createTwoFilesPatch("a/f.txt", "b/f.txt", before, after, "", "", { context: 3 });

describe("parseUnifiedDiff", () => {
  it("numbers context, removed and added lines in the old and new file, without the file headers", () => {
    const lines = parseUnifiedDiff(patch("a\nb\nc\n", "a\nB\nc\nd\n"));
    expect(lines).toEqual([
      { kind: "hunk", text: "@@ -1,3 +1,4 @@" },
      { kind: "context", text: "a", oldLine: 1, newLine: 1 },
      { kind: "removed", text: "b", oldLine: 2, newLine: null },
      { kind: "added", text: "B", oldLine: null, newLine: 2 },
      { kind: "context", text: "c", oldLine: 3, newLine: 3 },
      { kind: "added", text: "d", oldLine: null, newLine: 4 },
    ]);
  });

  it("reads a removed line that looks like a header as removed, and keeps the no-newline note", () => {
    const lines = parseUnifiedDiff(patch("--- x\n+++ y", ""));
    expect(lines.map((line) => line.kind)).toEqual(["hunk", "removed", "removed", "note"]);
    expect(lines[1]).toMatchObject({ text: "--- x", oldLine: 1 });
    expect(lines[3]).toEqual({ kind: "note", text: "No newline at end of file" });
  });

  it("starts a later hunk at its own line numbers", () => {
    const before = Array.from({ length: 20 }, (_, index) => `line ${index + 1}`).join("\n") + "\n";
    const after = before.replace("line 2\n", "two\n").replace("line 18\n", "eighteen\n");
    const hunks = parseUnifiedDiff(patch(before, after)).filter((line) => line.kind === "hunk");
    expect(hunks.map((line) => line.text)).toEqual(["@@ -1,5 +1,5 @@", "@@ -15,6 +15,6 @@"]);
  });
});

describe("formatBytes", () => {
  it("says bytes up to a KiB, then a tenth of the unit", () => {
    expect([formatBytes(8), formatBytes(1536), formatBytes(5 * 1024 ** 3)]).toEqual([
      "8 B",
      "1.5 KiB",
      "5 GiB",
    ]);
  });
});
