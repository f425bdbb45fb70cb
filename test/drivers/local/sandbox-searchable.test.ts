import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { makeSearchableUpwards } from "@/server/workspace/drivers/bubblewrap/sandbox-dirs";

const top = await fs.mkdtemp(path.join(os.tmpdir(), "berth-searchable-"));
afterAll(() => fs.rm(top, { recursive: true, force: true }));

// The boot check of the `local` driver: a clone under a 0700 folder must still let the workspace uids
// reach their folders (as root; as another user the sandbox runs in a user namespace and needs nothing).
it.runIf(process.getuid?.() === 0)(
  "makes every folder above the base dir searchable by others, and says which it changed",
  async () => {
    const locked = path.join(top, "home-0700");
    await fs.mkdir(locked, { mode: 0o700 });
    await fs.chmod(locked, 0o700);
    const basedir = path.join(locked, "clone", ".data", "workspaces");
    const changed = await makeSearchableUpwards(basedir);
    expect(changed).toContain(locked);
    expect((await fs.stat(locked)).mode & 0o777).toBe(0o701);
    // Search only: nothing became listable, and a second run changes nothing.
    expect(await makeSearchableUpwards(basedir)).toEqual([]);
  },
);
