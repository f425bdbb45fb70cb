import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { safePathSegment } from "@/server/workspace/drivers/host-folder/folder-layout";
import { hostFolderDriver } from "../../drivers/local/support/sandbox-env";

const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-local-resources-")));
afterAll(() => fs.rm(basedir, { recursive: true, force: true }));

it("lists the workspace folders of the layout, never another driver's runtime folder under the base dir", async () => {
  const workspace = path.join(basedir, "tenant-1", "user-1", safePathSegment("ws.1"));
  await fs.mkdir(workspace, { recursive: true });
  // The E2B driver keeps gateway credentials here: three levels deep, like a workspace folder.
  await fs.mkdir(path.join(basedir, ".runtime", "e2b", "sandbox-x"), { recursive: true });

  const machine = hostFolderDriver(basedir);
  const resources = await machine.listResources();
  expect(resources).toEqual([{ tenantId: "tenant-1", workspaceId: "ws.1", locator: workspace }]);
  await expect(
    machine.reap({ tenantId: null, workspaceId: null, locator: path.join(basedir, ".runtime", "e2b") }),
  ).rejects.toThrow(/refusing to reap/);
});
