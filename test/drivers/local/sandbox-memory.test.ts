import fs from "node:fs/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { BubblewrapMachine } from "@/server/workspace/drivers/bubblewrap/bubblewrap-machine";
import { describeSandbox, pollUntil, sandboxTestbed, specOf } from "./support/sandbox-env";

const LIMIT = 96 * 1024 * 1024;
const ROOT = (process.getuid?.() ?? 0) === 0;
// Allocates and touches `mib` MiB (python3 is in Debian's base system; bytearray pages are written).
const allocate = (mib: number) => [
  "/usr/bin/python3",
  "-c",
  `b = bytearray(${mib} << 20); print(len(b) >> 20)`,
];

/** The cgroup (v1 memory hierarchy or v2) a host pid is in, as /proc/<pid>/cgroup says. */
async function memoryCgroupOf(pid: number): Promise<string> {
  const lines = (await fs.readFile(`/proc/${pid}/cgroup`, "utf8")).trim().split("\n");
  const line = lines.find((l) => /^\d+:memory:/.test(l)) ?? lines.find((l) => l.startsWith("0::")) ?? "";
  return line.slice(line.lastIndexOf(":") + 1);
}

/**
 * Memory of a confined workspace: all its sandboxes share one cgroup with the configured limit (swap
 * included), so an agent's command cannot take the host's memory. Needs Berth as root (CI and the
 * default install); elsewhere the probe says the memory is not limited, which the last case checks.
 */
describeSandbox("bubblewrap sandbox: memory limit", () => {
  let testbed: Awaited<ReturnType<typeof sandboxTestbed>>;
  let mine: BubblewrapMachine;
  let theirs: BubblewrapMachine;

  beforeAll(async () => {
    testbed = await sandboxTestbed({ memoryLimitBytes: LIMIT });
    mine = await testbed.folders.attach(specOf("ws-mem-mine"));
    theirs = await testbed.folders.attach(specOf("ws-mem-theirs", { userId: "user-b" }));
  });

  afterAll(async () => {
    await testbed.folders.stopAll(specOf("ws-mem-mine"));
    await testbed.folders.stopAll(specOf("ws-mem-theirs", { userId: "user-b" }));
    await testbed.cleanup();
  });

  it.runIf(ROOT)(
    "lets a command use memory under the limit and OOM-kills one that goes over it",
    async () => {
      const under = await mine.exec(allocate(32), { timeoutMs: 20_000 });
      expect(under.stdout.toString().trim()).toBe("32");
      expect(under.exitCode).toBe(0);
      const over = await mine.exec(allocate(400), { timeoutMs: 20_000 });
      expect(over.stdout.toString()).not.toContain("400");
      expect(over.exitCode).not.toBe(0);
      // The workspace is still usable after its command was killed.
      expect((await mine.exec(["/bin/echo", "alive"])).stdout.toString()).toBe("alive\n");
    },
  );

  it.runIf(ROOT)(
    "puts every sandbox of a workspace in the workspace's own group, and stop removes it",
    async () => {
      const running = mine.exec(["/bin/sleep", "30"], { timeoutMs: 60_000 });
      const other = theirs.exec(["/bin/sleep", "30"], { timeoutMs: 60_000 });
      const key = mine.options.key;
      const pidsOf = (k: string) => testbed.folders.registry.live(k);
      const [pid] = await pollUntil(
        () => pidsOf(key),
        (pids) => pids.length > 0,
      );
      const [otherPid] = await pollUntil(
        () => pidsOf(theirs.options.key),
        (pids) => pids.length > 0,
      );
      // The pid is on record from the spawn; its first act (before the uid drop and bwrap) is to join.
      const groupOf = (p: number, k: string) =>
        pollUntil(
          () => memoryCgroupOf(p),
          (group) => group.endsWith(`/berth-sandbox/${k}`),
        );
      expect(await groupOf(pid!, key)).toMatch(new RegExp(`/berth-sandbox/${key}$`));
      expect(await groupOf(otherPid!, theirs.options.key)).toMatch(
        new RegExp(`/berth-sandbox/${theirs.options.key}$`),
      );
      const cgroups = testbed.folders.registry.cgroups;
      expect(cgroups.available).toBe(true);
      if (!cgroups.available) return;
      const limitFile = cgroups.version === 2 ? "memory.max" : "memory.limit_in_bytes";
      const dir = `${cgroups.root}/${key}`;
      expect(Number(await fs.readFile(`${dir}/${limitFile}`, "utf8"))).toBe(LIMIT);

      await testbed.folders.stopAll(specOf("ws-mem-mine"));
      expect((await running).killed || (await running).exitCode !== 0).toBe(true);
      await expect(fs.stat(dir)).rejects.toThrow(/ENOENT/);
      // The other workspace's group and command are untouched.
      await expect(fs.stat(`${cgroups.root}/${theirs.options.key}`)).resolves.toBeTruthy();
      await testbed.folders.stopAll(specOf("ws-mem-theirs", { userId: "user-b" }));
      await other;
    },
  );

  it.runIf(ROOT)(
    "ends, on stop, a sandbox process the registry lost track of: the group lists them all",
    async () => {
      const key = mine.options.key;
      const running = mine.exec(["/bin/sleep", "30"], { timeoutMs: 60_000 });
      const [pid] = await pollUntil(
        () => testbed.folders.registry.live(key),
        (pids) => pids.length > 0,
      );
      // What a sandbox orphaned during its setup looks like to the registry: not on record.
      testbed.folders.registry.forget(key, pid!);
      expect(await testbed.folders.registry.live(key)).toEqual([]);
      await testbed.folders.stopAll(specOf("ws-mem-mine"));
      const result = await running;
      expect(result.exitCode).not.toBe(0);
      expect(result.stdout.toString()).toBe("");
    },
  );

  it.skipIf(ROOT)("says the memory is not limited when Berth cannot create cgroups", () => {
    expect(testbed.folders.registry.cgroups.available).toBe(false);
  });
});
