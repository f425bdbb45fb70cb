/**
 * The host-folder deleter behind purge and reap (host-tree-deleter.ts): everything goes, in batches that
 * report progress; an abort stops it between batches and running it again finishes the job; links are
 * removed, never followed; any depth.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import {
  deleteHostTree,
  type TreeDeletionProgress,
} from "@/server/workspace/drivers/host-folder/host-tree-deleter";

const scratch = await fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), "berth-tree-deleter-")));
afterAll(() => fsp.rm(scratch, { recursive: true, force: true }));

/** `dirs` folders of `files` empty files each under `root`, plus nested levels; returns the file count. */
function makeTree(root: string, dirs: number, files: number): number {
  for (let d = 0; d < dirs; d++) {
    const dir = path.join(root, `d${d}`, "nested");
    fs.mkdirSync(dir, { recursive: true });
    for (let f = 0; f < files; f++) fs.closeSync(fs.openSync(path.join(dir, `f${f}`), "w"));
  }
  fs.writeFileSync(path.join(root, ".mcp"), "{}");
  return dirs * files + 1;
}

function countFiles(root: string): number {
  return fs.readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => !e.isDirectory())
    .length;
}

it("deletes every file and folder in batches, reporting progress after each", async () => {
  const root = path.join(scratch, "whole");
  const files = makeTree(root, 20, 150);
  const reports: TreeDeletionProgress[] = [];
  const done = await deleteHostTree(root, { batchSize: 40, onProgress: (p) => void reports.push(p) });
  expect(fs.existsSync(root)).toBe(false);
  expect(done).toEqual({ files, directories: 20 * 2 + 1 });
  // One report per batch of at most 40 entries, counting up to the total.
  expect(reports.length).toBeGreaterThan(files / 40);
  expect(reports.at(-1)).toEqual(done);
  expect(await deleteHostTree(root)).toEqual({ files: 0, directories: 0 });
});

it("stops at the signal between batches and finishes when run again", async () => {
  const root = path.join(scratch, "aborted");
  const files = makeTree(root, 10, 100);
  const controller = new AbortController();
  const stop = new Error("shutting down");
  let deletedBeforeStop = 0;
  await expect(
    deleteHostTree(root, {
      batchSize: 25,
      signal: controller.signal,
      onProgress: (p) => {
        deletedBeforeStop = p.files;
        if (p.files >= 300) controller.abort(stop);
      },
    }),
  ).rejects.toBe(stop);
  // Nothing more went after the stop: the rest is still there, for the next run.
  expect(deletedBeforeStop).toBeGreaterThanOrEqual(300);
  expect(deletedBeforeStop).toBeLessThan(300 + 25);
  expect(countFiles(root)).toBe(files - deletedBeforeStop);

  const resumed = await deleteHostTree(root, { batchSize: 50 });
  expect(fs.existsSync(root)).toBe(false);
  expect(resumed.files).toBe(files - deletedBeforeStop);
});

it("never follows a link out of the tree, and handles any depth", async () => {
  const outside = path.join(scratch, "outside");
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, "keep.txt"), "kept");
  const root = path.join(scratch, "links");
  let deep = root;
  for (let level = 0; level < 600; level++) deep = path.join(deep, "d");
  fs.mkdirSync(deep, { recursive: true });
  fs.writeFileSync(path.join(deep, "bottom.txt"), "x");
  fs.symlinkSync(outside, path.join(root, "to-outside"));
  fs.symlinkSync(path.join(outside, "keep.txt"), path.join(deep, "to-file"));

  const done = await deleteHostTree(root, { batchSize: 8 });
  expect(fs.existsSync(root)).toBe(false);
  expect(done).toEqual({ files: 3, directories: 601 });
  expect(fs.readFileSync(path.join(outside, "keep.txt"), "utf8")).toBe("kept");
});

// The check reads where an opened directory is from /proc/self/fd (Linux, where the sandboxes run).
it.runIf(process.platform === "linux")(
  "refuses to go on through a folder swapped for a link mid-walk",
  async () => {
    const outside = path.join(scratch, "swap-target");
    fs.mkdirSync(path.join(outside, "victim"), { recursive: true });
    fs.writeFileSync(path.join(outside, "victim", "keep.txt"), "kept");
    const root = path.join(scratch, "swapped");
    fs.mkdirSync(path.join(root, "a", "b"), { recursive: true });
    for (let f = 0; f < 20; f++) fs.writeFileSync(path.join(root, "a", `f${f}`), "");
    fs.writeFileSync(path.join(root, "a", "b", "keep.txt"), "");
    let swapped = false;
    const deleting = deleteHostTree(root, {
      batchSize: 5,
      onProgress: () => {
        // "a" is being listed: an agent's process replaces it by a link to elsewhere, with a "b" there too.
        if (swapped || !fs.existsSync(path.join(root, "a", "b"))) return;
        swapped = true;
        fs.renameSync(path.join(root, "a"), path.join(scratch, "a-moved"));
        fs.symlinkSync(outside, path.join(root, "a"));
        fs.renameSync(path.join(outside, "victim"), path.join(outside, "b"));
      },
    });
    await expect(deleting).rejects.toThrow(/refusing to delete in .*resolves to/);
    expect(swapped).toBe(true);
    expect(fs.readFileSync(path.join(outside, "b", "keep.txt"), "utf8")).toBe("kept");
  },
);
