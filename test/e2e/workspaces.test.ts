/**
 * End to end for the Workspaces and Jobs pages: the real server (scripts/start.ts, workers in-process) with
 * a workspace provisioned by its own `workspace.provision` job, holding a lease, and a provision job that
 * failed (its workspace did not exist yet). Chromium reads the list and the detail, stops and purges the
 * workspace, retries the failed job, and on the retried (ready) workspace uploads a skill folder, browses
 * and downloads its files, and adds and removes a real MCP server from npm. Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and
 * skips (with the reason printed) elsewhere.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { addMember } from "@/server/modules/member/member.data";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { acquireLeaseLocked } from "@/server/modules/workspace/workspace-lifecycle.data";
import { enqueue } from "@/server/queue/enqueue";
import { closeSharedQueues, getQueues } from "@/server/queue/queues";
import type { RunningBerth } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import type { SeededTenant } from "./support/seed";

requireChromium();

const LEASE = {
  holder: "e2e:turn-1",
  reason: "e2e: a chat turn is running",
  expiresAt: new Date(Date.now() + 3_600_000),
};
const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");

describe.skipIf(!HAS_CHROMIUM)("workspaces and jobs pages, end to end", () => {
  let app: RunningBerth;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let liveId: string;
  let lateId: string;

  /** Runs a provision job in the server's workers and resolves (or rejects) when it has finished. */
  async function provision(workspaceId: string, reason: string) {
    const events = await getQueues().events("workspace");
    const job = await enqueue("workspace.provision", {
      tenantId: tenant.scope.tenantId,
      workspaceId,
      reason,
    });
    await job.waitUntilFinished(events, 60_000);
  }

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);

    const suffix = tenant.slug.slice("e2e-".length);
    liveId = `ws-live-${suffix}`;
    lateId = `ws-late-${suffix}`;
    // A workspace provisioned for real by the workers (local backend, in the app's data dir), then leased as a turn would.
    await upsertWorkspaceBinding(tenant.scope, {
      id: liveId,
      backendKind: "local",
      isolationPolicy: "PER_AGENT",
    });
    await provision(liveId, "e2e: first use");
    expect((await getWorkspace(tenant.scope, liveId)).state).toBe("READY");
    await acquireLeaseLocked(tenant.scope, liveId, LEASE);
    // A provision job for a workspace with no record yet: not retryable, so it fails at once.
    await expect(provision(lateId, "e2e: too early")).rejects.toThrow(/not found/);
  });

  afterAll(async () => {
    await closeSharedQueues();
    await e2e?.close();
  });

  // One signed-in context per user: the sign-in endpoint is rate limited, so each user signs in once.
  const contexts = new Map<string, BrowserContext>();

  /** A signed-in page at `pathname`; uncaught page errors (hydration mismatches included) fail the test. */
  async function signedInPage(
    pathname: string,
    user: { email: string; password: string } = tenant,
  ): Promise<{ page: Page; pageErrors: string[] }> {
    let context = contexts.get(user.email);
    const signedIn = !!context;
    context ??= await browser.newContext();
    contexts.set(user.email, context);
    const { page, pageErrors } = await watchedPage(context);
    if (!signedIn) {
      await page.goto(`${app.url}/sign-in`);
      await submitSignIn(page, user.email, user.password);
      // Either a tenant page or the form's alert: a refused sign-in fails with its message, not a timeout.
      const alert = page.getByRole("form", { name: "Sign in" }).getByRole("alert");
      await Promise.race([page.waitForURL(/\/t\/[^/]+$/), alert.waitFor()]);
      if (!/\/t\/[^/]+$/.test(page.url())) throw new Error(`sign-in failed: ${await alert.textContent()}`);
    }
    await page.goto(`${app.url}/t/${tenant.slug}${pathname}`);
    return { page, pageErrors };
  }

  const rowOf = (page: Page, testId: string, text: string) =>
    page.getByTestId(testId).filter({ hasText: text });
  const stateIn = (page: Page, scope: ReturnType<Page["getByTestId"]>, state: string) =>
    scope.getByTestId("workspace-state").filter({ hasText: new RegExp(`^${state}$`) });

  it("lists every workspace of the tenant with its state, backend and leases", async () => {
    const { page, pageErrors } = await signedInPage("/workspaces");
    const live = rowOf(page, "workspace-row", liveId);
    await stateIn(page, live, "ready").waitFor();
    // The local backend is confined by bubblewrap by default: no "trusted only" badge, no unconfined banner.
    expect(await live.textContent()).toContain("local");
    expect(await live.textContent()).not.toContain("trusted only");
    expect(await page.getByTestId("unconfined-backend-banner").count()).toBe(0);
    // The seeded workspace was bound but never used.
    const seeded = rowOf(page, "workspace-row", `ws-e2e-`);
    await stateIn(page, seeded, "pending").waitFor();
    expect(await page.getByTestId("workspace-row").count()).toBe(2);
    expect(await live.locator("td").nth(5).textContent()).toBe("1");
    expect(
      await page
        .getByRole("navigation", { name: "Tenant" })
        .getByRole("link", { name: "Workspaces" })
        .getAttribute("aria-current"),
    ).toBe("page");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("shows the lease and the reasoned events, refuses a stop while leased, then force-stops and purges", async () => {
    const { page, pageErrors } = await signedInPage("/workspaces");
    await page.getByRole("link", { name: liveId }).click();
    await page.waitForURL(new RegExp(`/workspaces/${liveId}$`));
    const summary = page.getByTestId("workspace-summary");
    await stateIn(page, summary, "ready").waitFor();

    const lease = page.getByTestId("lease-row");
    expect(await lease.count()).toBe(1);
    expect(await lease.textContent()).toContain(LEASE.holder);
    expect(await lease.textContent()).toContain(LEASE.reason);
    await rowOf(page, "event-row", "e2e: first use").filter({ hasText: "PENDING → PROVISIONING" }).waitFor();
    await rowOf(page, "event-row", "lease_acquired").filter({ hasText: LEASE.reason }).waitFor();
    expect(await page.getByTestId("state-reason").textContent()).toContain("provisioned");

    // Leased: the API refuses a plain stop, and the page says why instead of breaking.
    await page.getByRole("button", { name: "Stop…" }).click();
    const stopForm = page.getByRole("form", { name: "Confirm stop" });
    await stopForm.getByLabel("Reason").fill("e2e: admin stop");
    await stopForm.getByRole("button", { name: "Confirm stop" }).click();
    await page.getByTestId("action-error").filter({ hasText: "in use" }).waitFor();
    await stopForm.getByLabel(/Force/).check();
    await stopForm.getByRole("button", { name: "Confirm stop" }).click();
    await stateIn(page, summary, "stopped").waitFor();
    expect(await page.getByTestId("state-reason").textContent()).toContain("e2e: admin stop");
    await rowOf(page, "event-row", "e2e: admin stop").filter({ hasText: "STOPPING → STOPPED" }).waitFor();
    expect((await getWorkspace(tenant.scope, liveId)).state).toBe("STOPPED");

    // Purge asks for the id to be typed before it can be confirmed.
    await page.getByRole("button", { name: "Purge…" }).click();
    const purgeForm = page.getByRole("form", { name: "Confirm purge" });
    const purgeButton = purgeForm.getByRole("button", { name: "Purge generation 1" });
    expect(await purgeButton.isDisabled()).toBe(true);
    await purgeForm.getByLabel("Workspace id").fill(liveId);
    await purgeForm.getByLabel(/Force/).check();
    await purgeButton.click();
    await stateIn(page, summary, "purged").waitFor();
    await page.getByTestId("purge-receipt").waitFor();
    expect(await page.getByTestId("lease-row").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Purge…" }).isDisabled()).toBe(true);
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("lists the failed job with its reason and retries it until it succeeds", async () => {
    const { page, pageErrors } = await signedInPage("/jobs");
    const failed = rowOf(page, "job-row", lateId);
    await failed
      .getByTestId("job-state")
      .filter({ hasText: /^failed$/ })
      .waitFor();
    expect(await failed.textContent()).toContain("workspace.provision");
    expect(await failed.textContent()).toMatch(/not found/);

    // Now that the record exists, the same job can succeed: Retry puts it back in the queue.
    await upsertWorkspaceBinding(tenant.scope, {
      id: lateId,
      backendKind: "local",
      isolationPolicy: "PER_AGENT",
    });
    await failed.getByRole("button", { name: "Retry" }).click();
    // A completed provision job is removed at once, so its row leaves the list when the retry succeeds.
    await failed.waitFor({ state: "detached" });
    expect((await getWorkspace(tenant.scope, lateId)).state).toBe("READY");

    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Workspaces" }).click();
    await stateIn(page, rowOf(page, "workspace-row", lateId), "ready").waitFor();
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("uploads a skill folder, walks the workdir to it, downloads a file, and adds and removes an MCP server", async () => {
    // A skill folder on disk, chosen with the folder picker as an admin would.
    const folder = await fs.mkdtemp(path.join(os.tmpdir(), "berth-e2e-skill-"));
    const skillDir = path.join(folder, "greeter");
    await fs.mkdir(skillDir);
    const skillMd = "---\nname: greeter\ndescription: Greets from the e2e test\n---\n# Greeter\nSay hello.\n";
    await fs.writeFile(path.join(skillDir, "SKILL.md"), skillMd);
    await fs.writeFile(path.join(skillDir, "notes.txt"), "notes\n");

    const { page, pageErrors } = await signedInPage(`/workspaces/${lateId}`);
    await stateIn(page, page.getByTestId("workspace-summary"), "ready").waitFor();
    const uploadForm = page.getByRole("form", { name: "Upload a skill" });
    await uploadForm.getByLabel(/Skill folder/).setInputFiles(skillDir);
    await uploadForm.getByRole("button", { name: "Upload" }).click();
    await page.getByTestId("skills-message").filter({ hasText: "Installed greeter" }).waitFor();
    const skill = rowOf(page, "skill-row", "greeter");
    await skill.filter({ hasText: "Greets from the e2e test" }).waitFor();

    // The same files, as the agent sees them in the workdir.
    for (const folderName of ["skills/", "default/", "greeter/"]) {
      await page.getByTestId("file-row").getByRole("button", { name: folderName, exact: true }).click();
    }
    await page.getByTestId("files-path").filter({ hasText: "/skills/default/greeter" }).waitFor();
    expect(await page.getByTestId("file-row").count()).toBe(2);
    await page.getByTestId("file-row").getByRole("button", { name: "SKILL.md", exact: true }).click();
    await page.getByTestId("file-content").filter({ hasText: "Say hello." }).waitFor();
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByTestId("file-preview").getByRole("button", { name: "Download" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("SKILL.md");
    expect(await fs.readFile(await download.path(), "utf8")).toBe(skillMd);

    await skill.getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("skills-message").filter({ hasText: "Removed greeter" }).waitFor();
    await skill.waitFor({ state: "detached" });

    // An MCP server from npm, started by the workspace (local backend: on the host) when the scope lists.
    const addForm = page.getByRole("form", { name: "Add an MCP server" });
    await addForm.getByLabel("Name", { exact: true }).fill("everything");
    await addForm.getByLabel("Command", { exact: true }).fill(process.execPath);
    await addForm.getByLabel(/Arguments/).fill(`${EVERYTHING_ENTRY}\nstdio`);
    await addForm.getByRole("button", { name: "Add" }).click();
    await page.getByTestId("mcps-message").filter({ hasText: "Added everything" }).waitFor();
    const mcp = rowOf(page, "mcp-row", "everything");
    await mcp.getByTestId("mcp-tools").filter({ hasText: "echo" }).waitFor();
    await mcp.getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("mcps-message").filter({ hasText: "Removed everything" }).waitFor();
    await mcp.waitFor({ state: "detached" });
    expect(pageErrors).toEqual([]);
    await page.close();
    await fs.rm(folder, { recursive: true, force: true });
  });

  it("shows a viewer the workspaces but no usable Stop/Purge, and says why the jobs page is closed", async () => {
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: app.url,
      prisma: getDb(),
      log: () => {},
    });
    const suffix = tenant.slug.slice("e2e-".length);
    const viewer = { email: `viewer-${suffix}@example.test`, password: `pw-viewer-${suffix}` };
    const { owner } = await createTenantWithOwner(auth, {
      tenantName: `Viewer home ${suffix}`,
      slug: `e2e-viewer-${suffix}`,
      name: "E2E Viewer",
      ...viewer,
    });
    await addMember(tenant.scope, { userId: owner.id, role: "viewer" });

    const { page, pageErrors } = await signedInPage(`/workspaces/ws-e2e-${suffix}`, viewer);
    await stateIn(page, page.getByTestId("workspace-summary"), "pending").waitFor();
    await page.getByTestId("actions-role-note").filter({ hasText: "you are viewer" }).waitFor();
    expect(await page.getByRole("button", { name: "Stop…" }).isDisabled()).toBe(true);
    expect(await page.getByRole("button", { name: "Purge…" }).isDisabled()).toBe(true);
    await page.getByText("Purge receipts are visible to admins only.").waitFor();

    // A ready workspace: the viewer sees its files and skills but cannot change them.
    await page.goto(`${app.url}/t/${tenant.slug}/workspaces/${lateId}`);
    await page.getByTestId("file-row").first().waitFor();
    await page.getByText("Changing skills needs the member role; you are viewer.").waitFor();
    await page.getByText("Changing MCP servers needs the member role; you are viewer.").waitFor();
    const upload = page.getByRole("form", { name: "Upload a skill" });
    expect(await upload.getByLabel(/Skill folder/).isDisabled()).toBe(true);
    expect(await upload.getByRole("button", { name: "Upload" }).isDisabled()).toBe(true);
    const addMcp = page.getByRole("form", { name: "Add an MCP server" });
    expect(await addMcp.getByRole("button", { name: "Add" }).isDisabled()).toBe(true);

    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Jobs" }).click();
    await page
      .getByRole("alert")
      .filter({ hasText: /admin role/ })
      .waitFor();
    expect(await page.getByTestId("job-row").count()).toBe(0);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
