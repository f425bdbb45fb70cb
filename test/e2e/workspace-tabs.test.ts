/**
 * End to end for a workspace's tabs on a workspace the workers provisioned for real (local backend, in the
 * app's data dir), as a tenant admin in Chromium: Files (upload with the file picker, open, edit in place
 * and save, download, new folder, delete behind a confirmation, a binary file refused for editing), Events
 * (filtered by kind on the server; the page's own reads add no events), Skills (a folder upload, walked to
 * in Files, removed) and MCP servers (a real server from npm, its state and tools, removed). Needs
 * /usr/bin/chromium: a missing browser FAILS under CI=1 and skips (with the reason printed) elsewhere.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import type { BerthServer } from "./support/berth-server";
import { downloadedText, HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { provisionLocalWorkspace } from "./support/local-workspace";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { signedInPages } from "./support/signed-in";
import { closeProcessBerth } from "@/server/composition/process-berth";

requireChromium();

const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const TRANSITIONS = ["provisioning", "provisioned", "stopping", "stopped", "purging", "purged", "failed"];
const shot = screenshotter("workspace-tabs");

describe.skipIf(!HAS_CHROMIUM)("a workspace's files, events, skills and MCP tabs, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let workspaceId: string;
  let folder: string;
  let open: ReturnType<typeof signedInPages>;

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    open = signedInPages(app, browser, tenant.slug);
    folder = await fs.mkdtemp(path.join(os.tmpdir(), "berth-e2e-tabs-"));
    workspaceId = await provisionLocalWorkspace(tenant, "tabs");
  });

  afterAll(async () => {
    printScreenshotListing("workspace-tabs");
    await closeProcessBerth();
    await e2e?.close();
    if (folder) await fs.rm(folder, { recursive: true, force: true });
  });

  const fileRow = (page: Page, name: string) =>
    page.getByTestId("file-row").filter({ has: page.getByRole("button", { name, exact: true }) });
  const leaseEvents = () => getDb().workspaceEvent.count({ where: { workspaceId, kind: "lease_acquired" } });

  it("uploads, opens, edits, downloads and deletes a file, and makes a folder", async () => {
    const notes = path.join(folder, "notes.txt");
    await fs.writeFile(notes, "a draft\n");
    const { page, pageErrors } = await open(`/workspaces/${workspaceId}?tab=files`, tenant);
    await fileRow(page, "skills/").waitFor();

    await page.getByLabel("Files to upload").setInputFiles(notes);
    await fileRow(page, "notes.txt").waitFor();
    await shot(page, "files-uploaded");

    // The same name again: the page asks before replacing the file, and Replace overwrites it.
    await fs.writeFile(notes, "first line\n");
    await page.getByLabel("Files to upload").setInputFiles(notes);
    const replace = page.getByTestId("replace-files-dialog");
    await replace.getByRole("listitem").filter({ hasText: "notes.txt" }).waitFor();
    await shot(page, "files-replace-asked");
    await replace.getByRole("button", { name: "Replace" }).click();
    await replace.waitFor({ state: "detached" });

    await fileRow(page, "notes.txt").getByRole("button", { name: "notes.txt", exact: true }).click();
    const preview = page.getByTestId("file-preview");
    await preview.getByTestId("file-content").filter({ hasText: "first line" }).waitFor();
    await preview.getByRole("button", { name: "Edit" }).click();
    await preview.getByLabel("Contents of notes.txt").fill("edited in the browser\n");
    await shot(page, "files-editing");
    await preview.getByRole("button", { name: "Save" }).click();
    await preview.getByTestId("file-content").filter({ hasText: "edited in the browser" }).waitFor();

    // What was saved is what the workspace holds: downloaded through the signed link, and after a reload.
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      preview.getByRole("button", { name: "Download" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("notes.txt");
    expect(await downloadedText(download)).toBe("edited in the browser\n");
    await page.reload();
    await fileRow(page, "notes.txt").getByRole("button", { name: "notes.txt", exact: true }).click();
    await page.getByTestId("file-content").filter({ hasText: "edited in the browser" }).waitFor();

    // A binary file opens as "binary", with no Edit.
    const image = path.join(folder, "image.bin");
    await fs.writeFile(image, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0xff]));
    await page.getByLabel("Files to upload").setInputFiles(image);
    await fileRow(page, "image.bin").getByRole("button", { name: "image.bin", exact: true }).click();
    await page.getByTestId("file-binary").waitFor();
    expect(await page.getByTestId("file-preview").getByRole("button", { name: "Edit" }).count()).toBe(0);

    await page.getByRole("button", { name: "New folder" }).click();
    const newFolder = page.getByRole("form", { name: "New folder" });
    await newFolder.getByLabel("Name").fill("reports");
    await newFolder.getByRole("button", { name: "Create" }).click();
    await fileRow(page, "reports/").waitFor();
    await fileRow(page, "reports/").getByRole("button", { name: "reports/", exact: true }).click();
    await page.getByTestId("files-path").filter({ hasText: "reports" }).waitFor();
    await page.getByText("This folder is empty").waitFor();
    await page.getByTestId("files-path").getByRole("button", { name: "workdir" }).click();

    await fileRow(page, "notes.txt").getByRole("button", { name: "Delete notes.txt" }).click();
    const confirm = page.getByTestId("confirm-dialog");
    expect(await confirm.textContent()).toContain("notes.txt is deleted from the workspace");
    await shot(page, "files-delete-confirm");
    await confirm.getByRole("button", { name: "Delete" }).click();
    await fileRow(page, "notes.txt").waitFor({ state: "detached" });
    await shot(page, "files-after-delete");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("filters the events by kind on the server, and the page's own reads add none", async () => {
    const { page, pageErrors } = await open(`/workspaces/${workspaceId}?tab=files`, tenant);
    await fileRow(page, "reports/").waitFor();
    const before = await leaseEvents();
    // Reads: the file list, a file, the skills and the MCP servers (which starts the scope's servers).
    await fileRow(page, "image.bin").getByRole("button", { name: "image.bin", exact: true }).click();
    await page.getByTestId("file-binary").waitFor();
    await page.getByRole("tab", { name: "Skills" }).click();
    await page.getByText("No skills in this partition").waitFor();
    await page.getByRole("tab", { name: "MCP servers" }).click();
    await page.getByText("No MCP servers in this scope").waitFor();
    expect(await leaseEvents()).toBe(before);

    await page.getByRole("tab", { name: "Events" }).click();
    await page.getByTestId("event-row").first().waitFor();
    await page.getByLabel("Filter by event kind").selectOption("lease_acquired");
    // The upload, the edit, the second upload, the folder and the delete: one lease each, all recorded.
    await vi.waitFor(async () => expect(await page.getByTestId("event-row").count()).toBe(before));
    expect(before).toBeGreaterThanOrEqual(5);
    for (const text of await page.getByTestId("event-row").allTextContents())
      expect(text).toContain("lease_acquired");
    await shot(page, "events-leases");

    await page.getByLabel("Filter by event kind").selectOption({ label: "State changes" });
    await page.getByTestId("event-row").filter({ hasText: "provisioned" }).waitFor();
    const kinds = await page.getByTestId("event-row").locator("td:nth-child(2)").allTextContents();
    expect(kinds.length).toBeGreaterThan(0);
    expect(kinds.every((kind) => TRANSITIONS.includes(kind.trim()))).toBe(true);
    await shot(page, "events-state-changes");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("uploads a skill folder, walks the workdir to it, removes it, and adds and removes an MCP server", async () => {
    const skillDir = path.join(folder, "greeter");
    await fs.mkdir(skillDir);
    const skillMd = "---\nname: greeter\ndescription: Greets from the e2e test\n---\n# Greeter\nSay hello.\n";
    await fs.writeFile(path.join(skillDir, "SKILL.md"), skillMd);
    await fs.writeFile(path.join(skillDir, "notes.txt"), "notes\n");

    const { page, pageErrors } = await open(`/workspaces/${workspaceId}?tab=skills`, tenant);
    const uploadForm = page.getByRole("form", { name: "Upload a skill" });
    await uploadForm.getByLabel(/Skill folder/).setInputFiles(skillDir);
    await uploadForm.getByRole("button", { name: "Upload folder" }).click();
    await page.getByTestId("skills-message").filter({ hasText: "Installed greeter" }).waitFor();
    const skill = page.getByTestId("skill-row").filter({ hasText: "greeter" });
    await skill.filter({ hasText: "Greets from the e2e test" }).waitFor();
    await shot(page, "skills");

    // The same files, as the agent sees them in the workdir.
    await page.getByRole("tab", { name: "Files" }).click();
    for (const name of ["skills/", "default/", "greeter/"]) {
      await fileRow(page, name).getByRole("button", { name, exact: true }).click();
    }
    await page.getByTestId("files-path").filter({ hasText: "greeter" }).waitFor();
    await vi.waitFor(async () => expect(await page.getByTestId("file-row").count()).toBe(2));
    await fileRow(page, "SKILL.md").getByRole("button", { name: "SKILL.md", exact: true }).click();
    await page.getByTestId("file-content").filter({ hasText: "Say hello." }).waitFor();

    await page.getByRole("tab", { name: "Skills" }).click();
    await skill.getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("confirm-dialog").getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("skills-message").filter({ hasText: "Removed greeter" }).waitFor();
    await skill.waitFor({ state: "detached" });

    // An MCP server from npm, started by the workspace (local backend: confined on the host) when listed.
    await page.getByRole("tab", { name: "MCP servers" }).click();
    const addForm = page.getByRole("form", { name: "Add an MCP server" });
    await addForm.getByLabel("Name", { exact: true }).fill("everything");
    await addForm.getByLabel("Command", { exact: true }).fill(process.execPath);
    await addForm.getByLabel(/Arguments/).fill(`${EVERYTHING_ENTRY}\nstdio`);
    await addForm.getByRole("button", { name: "Add" }).click();
    await page.getByTestId("mcps-message").filter({ hasText: "Added everything" }).waitFor();
    const mcp = page.getByTestId("mcp-row").filter({ hasText: "everything" });
    await mcp
      .getByTestId("mcp-state")
      .filter({ hasText: /^running$/ })
      .waitFor();
    await mcp.getByTestId("mcp-tools").filter({ hasText: "echo" }).waitFor();
    await shot(page, "mcp-running");
    await mcp.getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("confirm-dialog").getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("mcps-message").filter({ hasText: "Removed everything" }).waitFor();
    await mcp.waitFor({ state: "detached" });
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
