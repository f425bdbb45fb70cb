import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildState, nextBuild } from "@/scripts/services/next-build";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");
const SERVER_OUTPUT = path.join(REPO_ROOT, ".next", "server");

// Folders no route reads. A dynamic fs/path call the tracer cannot scope (a runtime folder such as the local
// backend's basedir) makes Turbopack trace the whole project, these folders included, and print ~50 lines of
// "Dynamic filesystem access causes tracing of the whole project" per call on every `npm start` build.
const NEVER_TRACED = ["test", "bench", "docs", "deploy", "README.md", "ARCHITECTURE.md"];

/** Every file the build's `.nft.json` traces list, relative to the repository root. */
async function tracedFiles(): Promise<Set<string>> {
  const entries = await readdir(SERVER_OUTPUT, { recursive: true });
  const traces = entries.filter((entry) => entry.endsWith(".nft.json"));
  expect(traces.length).toBeGreaterThan(0);
  const files = new Set<string>();
  for (const trace of traces) {
    const traceFile = path.join(SERVER_OUTPUT, trace);
    const { files: listed } = JSON.parse(await readFile(traceFile, "utf8")) as { files: string[] };
    for (const file of listed)
      files.add(path.relative(REPO_ROOT, path.resolve(path.dirname(traceFile), file)));
  }
  return files;
}

describe("next build's server file traces", () => {
  beforeAll(async () => {
    // `npm test` builds before the streams; a lone run of this file builds like `npm start` does.
    if ((await buildState(REPO_ROOT)) !== "fresh") await nextBuild(REPO_ROOT, process.env);
  }, 900_000);

  it("hold only what the server needs, never the whole project", async () => {
    const files = await tracedFiles();
    const outsideServer = [...files].filter((file) =>
      NEVER_TRACED.some((top) => file === top || file.startsWith(`${top}${path.sep}`)),
    );
    expect(outsideServer).toEqual([]);
  });
});
