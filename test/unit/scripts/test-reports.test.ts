import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failures, slowestFiles, type TestReports } from "../../../scripts/services/test-reports";

// Reports in the shape Vitest's JSON reporter writes (`--reporter=json --outputFile.json=…`).
const root = "/repo";
const file = (name: string, fields: Record<string, unknown>) => ({
  name: path.join(root, name),
  startTime: 1_000,
  endTime: 2_000,
  status: "passed",
  message: "",
  assertionResults: [],
  ...fields,
});
const red = (text: string) => `\u001b[31m${text}\u001b[39m`;

let reports: TestReports;
beforeAll(async () => {
  reports = { dir: await mkdtemp(path.join(tmpdir(), "berth-reports-")), root };
  const stack = Array.from({ length: 20 }, (_, index) => `    at frame${index} (file.ts:${index})`);
  stack.splice(1, 0, "    at file:///repo/node_modules/@vitest/runner/dist/index.js:302:11");
  await writeFile(
    path.join(reports.dir, "integration.json"),
    JSON.stringify({
      testResults: [
        file("test/a.test.ts", {
          status: "failed",
          endTime: 61_000,
          assertionResults: [
            { fullName: "a passes", status: "passed", failureMessages: [] },
            {
              fullName: "a > times out",
              status: "failed",
              failureMessages: [[red("Error: Test timed out in 30000ms."), "", ...stack].join("\n")],
            },
          ],
        }),
        file("test/b.test.ts", { status: "failed", message: "Error: Hook timed out in beforeAll" }),
        file("test/c.test.ts", { endTime: 9_000 }),
      ],
    }),
  );
  await writeFile(
    path.join(reports.dir, "unit.json"),
    JSON.stringify({ testResults: [file("test/d.test.ts", { endTime: 31_000 })] }),
  );
});
afterAll(() => rm(reports.dir, { recursive: true, force: true }));

describe("npm test's report summary", () => {
  it("names each failed test with the start of its error, colours removed, and files that failed outside a test", async () => {
    const lines = await failures(reports, { name: "integration", code: 1 });
    expect(lines.slice(0, 2)).toEqual([
      "  test/a.test.ts > a > times out",
      "      Error: Test timed out in 30000ms.",
    ]);
    // Eight lines of the error at most, blank ones and frames inside packages dropped.
    expect(lines.slice(2, 4)).toEqual(["          at frame0 (file.ts:0)", "          at frame1 (file.ts:1)"]);
    expect(lines.indexOf("  test/b.test.ts")).toBe(1 + 8);
    expect(lines.slice(9)).toEqual(["  test/b.test.ts", "      Error: Hook timed out in beforeAll"]);
  });

  it("says so when a run failed with every test passing, or wrote no report", async () => {
    expect(await failures(reports, { name: "unit", code: 1 })).toEqual([
      `  unit: every test passed; look above for Vitest's "Unhandled Errors"`,
    ]);
    expect(await failures(reports, { name: "e2e", code: 134 })).toEqual([
      "  e2e: exited 134 without writing its report",
    ]);
  });

  it("lists the slowest files across runs, slowest first", async () => {
    expect(await slowestFiles(reports, ["integration", "unit", "e2e"], 3)).toEqual([
      "    60 s  test/a.test.ts (integration)",
      "    30 s  test/d.test.ts (unit)",
      "     8 s  test/c.test.ts (integration)",
    ]);
  });
});
