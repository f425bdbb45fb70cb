/**
 * Issue 11 ("Files and disks"): two real processes append 600 KB context lines to one session's
 * context.jsonl at the same time. Before appends held a lock, Node split each into 512 KiB writes and
 * the two processes' pieces interleaved (unreadable lines). Every line must parse, none may be lost.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startChild, stopChildren, type Child } from "./processes";

const PER_PROCESS = 100;
const BYTES = 600 * 1000;

describe("offload appends across processes", { timeout: 120_000 }, () => {
  let children: Child[] = [];
  let workdir: string | undefined;

  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
    if (workdir) await fs.rm(workdir, { recursive: true, force: true });
  });

  it("600 KB lines from two processes never interleave", async () => {
    workdir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-offload-")));
    children = ["a", "b"].map((tag) =>
      startChild("offload-append-process.ts", {
        MP_WORKDIR: workdir!,
        MP_TAG: tag,
        MP_COUNT: String(PER_PROCESS),
        MP_BYTES: String(BYTES),
      }),
    );
    await Promise.all(children.map((child) => child.nextLine((line) => line === "ready")));
    for (const child of children) child.process.stdin.write("go\n");
    await Promise.all(children.map((child) => child.nextLine((line) => line === "done")));

    const text = await fs.readFile(path.join(workdir, "sessions", "s1", "context.jsonl"), "utf8");
    const lines = text.split("\n").filter(Boolean);
    const unreadable = lines.filter((line) => {
      try {
        JSON.parse(line);
        return false;
      } catch {
        return true;
      }
    });
    expect(unreadable.length).toBe(0);
    const seen = lines.map((line) => {
      const message = JSON.parse(line) as { tag: string; index: number; content: [{ text: string }] };
      expect(message.content[0].text).toBe(message.tag.repeat(BYTES));
      return `${message.tag}${message.index}`;
    });
    expect(seen.sort()).toEqual(
      ["a", "b"].flatMap((tag) => Array.from({ length: PER_PROCESS }, (_, i) => `${tag}${i}`)).sort(),
    );
  });
});
