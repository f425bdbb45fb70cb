/**
 * End to end for a skill archive uploaded through the workspace's Skills tab in Chromium, on a workspace
 * the workers provisioned for real (local backend): a .zip holding a SKILL.md skill installs, is listed
 * with its front matter and is readable in the Files tab where the agent reads it; a .tar with a
 * path-traversal entry and a .zip without a SKILL.md are refused with the server's reason on the page and
 * nothing installed. Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and skips elsewhere.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { tarOf, zipOf } from "@/test/unit/workspace/support/archives";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { provisionLocalWorkspace } from "./support/local-workspace";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { signedInPages } from "./support/signed-in";
import { closeProcessBerth } from "@/server/composition/process-berth";

requireChromium();

const shot = screenshotter("skill-archive");
const skillMd = (name: string, description: string) =>
  `---\nname: ${name}\ndescription: ${description}\n---\n# ${name}\nFollow the checklist.\n`;

describe.skipIf(!HAS_CHROMIUM)("a skill archive uploaded in the Skills tab, end to end", () => {
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
    folder = await fs.mkdtemp(path.join(os.tmpdir(), "berth-e2e-skill-archive-"));
    workspaceId = await provisionLocalWorkspace(tenant, "archive");
  });

  afterAll(async () => {
    printScreenshotListing("skill-archive");
    await closeProcessBerth();
    await e2e?.close();
    if (folder) await fs.rm(folder, { recursive: true, force: true });
  });

  const fileRow = (page: Page, name: string) =>
    page.getByTestId("file-row").filter({ has: page.getByRole("button", { name, exact: true }) });

  /** Writes `bytes` as `name` and sends it through the archive form. */
  async function sendArchive(page: Page, name: string, bytes: Buffer): Promise<void> {
    const file = path.join(folder, name);
    await fs.writeFile(file, bytes);
    const form = page.getByRole("form", { name: "Skill archive" });
    await form.getByLabel(/Skill archive/).setInputFiles(file);
    await form.getByRole("button", { name: "Send archive" }).click();
  }

  it("installs a zipped skill, lists it, and shows its SKILL.md in the Files tab", async () => {
    const zip = await zipOf([
      { name: "checklist/SKILL.md", content: skillMd("checklist", "Runs the release checklist") },
      { name: "checklist/steps/one.txt", content: "step one\n" },
    ]);
    const { page, pageErrors } = await open(`/workspaces/${workspaceId}?tab=skills`, tenant);
    await page.getByText("No skills in this partition").waitFor();
    await sendArchive(page, "checklist.zip", zip);
    await page.getByTestId("skills-message").filter({ hasText: "Installed checklist" }).waitFor();
    const skill = page.getByTestId("skill-row").filter({ hasText: "checklist" });
    await skill.filter({ hasText: "Runs the release checklist" }).waitFor();
    await shot(page, "archive-installed");

    // Where the agent reads it: skills/<partition>/<skill>/ in the workdir.
    await page.getByRole("tab", { name: "Files" }).click();
    for (const name of ["skills/", "default/", "checklist/"]) {
      await fileRow(page, name).getByRole("button", { name, exact: true }).click();
    }
    await page.getByTestId("files-path").filter({ hasText: "checklist" }).waitFor();
    await fileRow(page, "steps/").waitFor();
    await fileRow(page, "SKILL.md").getByRole("button", { name: "SKILL.md", exact: true }).click();
    await page.getByTestId("file-content").filter({ hasText: "Follow the checklist." }).waitFor();
    await shot(page, "archive-skill-file");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("refuses a tar with a path-traversal entry and a zip without SKILL.md, saying why", async () => {
    const { page, pageErrors } = await open(`/workspaces/${workspaceId}?tab=skills`, tenant);
    const message = page.getByTestId("skills-message");
    await page.getByTestId("skill-row").first().waitFor();
    const listed = await page.getByTestId("skill-row").count();

    const traversal = await tarOf([
      { name: "escape/SKILL.md", content: skillMd("escape", "Should never install") },
      { name: "../escaped.txt", content: "outside the skill" },
    ]);
    await sendArchive(page, "escape.tar", traversal);
    await message.filter({ hasText: "unsafe entry (parent directory reference)" }).waitFor();
    await shot(page, "archive-traversal-refused");

    const noSkill = await zipOf([{ name: "notes/readme.txt", content: "no skill here\n" }]);
    await sendArchive(page, "notes.zip", noSkill);
    await message.filter({ hasText: "contains no SKILL.md" }).waitFor();
    await shot(page, "archive-no-skill-refused");

    expect(await message.getAttribute("role")).toBe("alert");
    await vi.waitFor(async () => expect(await page.getByTestId("skill-row").count()).toBe(listed));
    expect(
      await page
        .getByTestId("skill-row")
        .filter({ hasText: /escape|notes/ })
        .count(),
    ).toBe(0);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
