/**
 * The file browser's calls over a real engine (local backend, provisioned by real workers): upload through
 * the streamed route (body limit, confinement, overwrite), edit in place (size cap, binary refusal, stale
 * edits), new folder and delete (a symlink deletes the link), the role gate, and the workspace's ledger:
 * reads write no events, changes do, and `workspace.events` pages and filters them by kind.
 */
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as uploadFile } from "@/app/api/workspaces/[id]/files/route";
import { FILE_UPLOAD_MAX_BYTES } from "@/server/modules/workspace-content/workspace-files.service";
import { hostWorkdirOf } from "@/test/drivers/local/support/sandbox-env";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { rejectionCode } from "../api/support/call-by-path";
import { freshSession } from "./harness";
import { closeProcessBerth } from "@/server/composition/process-berth";

const BASE = "http://berth.test";
let h: AgentApiHarness;
let workspaceId: string;
let workdir: string;

function upload(relative: string, body: BodyInit, options: { key?: string; overwrite?: boolean } = {}) {
  const query = new URLSearchParams({ path: relative, ...(options.overwrite ? { overwrite: "true" } : {}) });
  return uploadFile(
    new Request(`${BASE}/api/workspaces/${workspaceId}/files?${query.toString()}`, {
      method: "POST",
      headers: { authorization: `Bearer ${options.key ?? h.tenant.adminKey.plainKey}` },
      body,
      duplex: "half",
    } as RequestInit),
    { params: Promise.resolve({ id: workspaceId }) },
  );
}

beforeAll(async () => {
  h = await startAgentApiHarness("files");
  const { session, workspaceId: id } = await freshSession(h.tenant.ownerScope);
  workspaceId = id;
  const { workspace } = await h.workspace.service.resolveForSession(h.tenant.ownerScope, session.id);
  workdir = hostWorkdirOf(workspace);
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

const target = () => ({ ...h.ref, workspaceId });

describe("workspace files", () => {
  it("uploads a file (streamed), refuses a second one under the same name unless told to replace it", async () => {
    const first = await upload("docs/notes.txt", "first version\n");
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ path: "docs/notes.txt", sizeBytes: 14 });
    expect(await fs.readFile(path.join(workdir, "docs/notes.txt"), "utf8")).toBe("first version\n");

    const again = await upload("docs/notes.txt", "second\n");
    expect(again.status).toBe(409);
    expect(await upload("docs/notes.txt", "second\n", { overwrite: true })).toHaveProperty("status", 201);

    const listing = await h.owner.workspace.files.list({ ...target(), path: "docs" });
    expect(listing.entries.map((entry) => `${entry.name}:${entry.sizeBytes}`)).toEqual(["notes.txt:7"]);
  });

  it("refuses uploads over the limit (413), out of the workdir (403) and into .mcp or skills/ (403)", async () => {
    // A lazily generated body one chunk past the limit: refused while it streams, nothing written.
    let sent = 0;
    const chunk = new Uint8Array(1024 * 1024);
    const huge = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > FILE_UPLOAD_MAX_BYTES) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const tooLarge = await upload("big.bin", huge);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.headers.get("connection")).toBe("close");
    await expect(fs.stat(path.join(workdir, "big.bin"))).rejects.toThrow();

    expect((await upload("../escape.txt", "x")).status).toBe(403);
    expect((await upload(".mcp", "{}")).status).toBe(403);
    expect((await upload("skills/default/evil/SKILL.md", "x")).status).toBe(403);
    expect((await upload("viewer.txt", "x", { key: h.tenant.viewerKey.plainKey })).status).toBe(403);
  });

  it("edits a text file in place, refusing stale edits, binary files and NUL bytes", async () => {
    const opened = await h.owner.workspace.files.read({ ...target(), path: "docs/notes.txt" });
    expect(opened).toMatchObject({ content: "second\n", binary: false, editable: true, truncated: false });
    const saved = await h.owner.workspace.files.write({
      ...target(),
      path: "docs/notes.txt",
      content: "edited in the browser\n",
      expectedUpdatedAt: opened.updatedAt,
    });
    expect(saved).toMatchObject({ path: "docs/notes.txt", sizeBytes: 22 });
    expect(await fs.readFile(path.join(workdir, "docs/notes.txt"), "utf8")).toBe("edited in the browser\n");
    // Saved again from the old copy: the file changed since, so the save is refused.
    await fs.utimes(path.join(workdir, "docs/notes.txt"), new Date(), new Date(Date.now() + 5_000));
    expect(
      await rejectionCode(
        h.owner.workspace.files.write({
          ...target(),
          path: "docs/notes.txt",
          content: "stale",
          expectedUpdatedAt: saved.updatedAt,
        }),
      ),
    ).toBe("CONFLICT");

    expect((await upload("image.bin", new Uint8Array([0x89, 0x50, 0x00, 0xff, 0xfe]))).status).toBe(201);
    const binary = await h.owner.workspace.files.read({ ...target(), path: "image.bin" });
    expect(binary).toMatchObject({ binary: true, editable: false, content: "" });
    expect(
      await rejectionCode(h.owner.workspace.files.write({ ...target(), path: "image.bin", content: "text" })),
    ).toBe("BAD_REQUEST");
    expect(
      await rejectionCode(
        h.owner.workspace.files.write({ ...target(), path: "new.txt", content: "a\u0000b" }),
      ),
    ).toBe("BAD_REQUEST");
    expect(
      await rejectionCode(
        h.owner.workspace.files.write({
          ...target(),
          path: "docs/notes.txt",
          content: "x",
          mustNotExist: true,
        }),
      ),
    ).toBe("CONFLICT");
    expect(
      await rejectionCode(h.owner.workspace.files.write({ ...target(), path: "../../etc/x", content: "x" })),
    ).toBe("FORBIDDEN");
    expect(
      await rejectionCode(h.viewer.workspace.files.write({ ...target(), path: "v.txt", content: "x" })),
    ).toBe("FORBIDDEN");
  });

  it("makes folders and deletes files and folders; deleting a symlink removes the link only", async () => {
    await h.owner.workspace.files.mkdir({ ...target(), path: "reports/2030" });
    expect((await fs.stat(path.join(workdir, "reports/2030"))).isDirectory()).toBe(true);
    expect(await rejectionCode(h.owner.workspace.files.mkdir({ ...target(), path: "reports" }))).toBe(
      "CONFLICT",
    );

    await fs.symlink("docs/notes.txt", path.join(workdir, "link-to-notes"));
    expect(await h.owner.workspace.files.delete({ ...target(), path: "link-to-notes" })).toMatchObject({
      wasDir: false,
    });
    await expect(fs.lstat(path.join(workdir, "link-to-notes"))).rejects.toThrow();
    expect(await fs.readFile(path.join(workdir, "docs/notes.txt"), "utf8")).toBe("edited in the browser\n");

    expect(await h.owner.workspace.files.delete({ ...target(), path: "reports" })).toEqual({
      path: "reports",
      wasDir: true,
    });
    await expect(fs.stat(path.join(workdir, "reports"))).rejects.toThrow();
    for (const kept of [".", "skills", "data", ".mcp"]) {
      expect(await rejectionCode(h.owner.workspace.files.delete({ ...target(), path: kept }))).toBe(
        "FORBIDDEN",
      );
    }
    expect(await rejectionCode(h.owner.workspace.files.delete({ ...target(), path: "missing.txt" }))).toBe(
      "NOT_FOUND",
    );
    expect(await rejectionCode(h.viewer.workspace.files.delete({ ...target(), path: "image.bin" }))).toBe(
      "FORBIDDEN",
    );
  });

  it("writes no ledger events for reads, records changes, and pages the ledger filtered by kind", async () => {
    const leaseEvents = async () =>
      (
        await h.owner.workspace.events({
          ...target(),
          kinds: ["lease_acquired", "lease_released"],
          limit: 200,
        })
      ).items.length;
    const before = await leaseEvents();
    for (let i = 0; i < 3; i++) {
      await h.owner.workspace.files.list({ ...target(), path: "." });
      await h.owner.workspace.files.read({ ...target(), path: "docs/notes.txt" });
      await h.owner.workspace.skill.list(target());
      await h.owner.workspace.mcp.list(target());
      await h.owner.workspace.files.downloadToken({ ...target(), path: "docs/notes.txt" });
      await h.owner.workspace.get(target());
    }
    expect(await leaseEvents()).toBe(before);
    await h.owner.workspace.files.mkdir({ ...target(), path: "one-more" });
    expect(await leaseEvents()).toBe(before + 2);

    // Pages of 2 over the whole ledger: every event once, newest first.
    const all: { id: string; at: Date }[] = [];
    let cursor: string | undefined;
    do {
      const page = await h.owner.workspace.events({ ...target(), limit: 2, ...(cursor ? { cursor } : {}) });
      all.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(new Set(all.map((event) => event.id)).size).toBe(all.length);
    expect(all.map((event) => event.at.getTime())).toEqual(
      [...all].map((event) => event.at.getTime()).sort((a, b) => b - a),
    );
    const transitions = await h.owner.workspace.events({
      ...target(),
      kinds: ["provisioning", "provisioned"],
    });
    expect(transitions.items.map((event) => event.kind)).toEqual(["provisioned", "provisioning"]);
    // The newest state change, whatever came after it.
    expect((await h.owner.workspace.get(target())).lastTransition?.kind).toBe("provisioned");
  });

  it("still names the newest state change once more than a page of events came after it", async () => {
    // Each change is a lease taken and released: two events, none of them a transition.
    for (let i = 0; i < 26; i++) await h.owner.workspace.files.mkdir({ ...target(), path: `page-${i}` });
    const page = await h.owner.workspace.get(target());
    expect(page.events).toHaveLength(50);
    expect(page.events.map((event) => event.kind)).not.toContain("provisioned");
    expect(page.lastTransition?.kind).toBe("provisioned");
  });
});
