/**
 * End to end for the Workspaces and Jobs pages: the real server (scripts/start.ts, workers in-process) with
 * a workspace provisioned by its own `workspace.provision` job, holding a lease, and a provision job that
 * failed (its workspace did not exist yet). Chromium filters the list on the server, reads the workspace's
 * tabs, stops it (the "requested" note goes once it has stopped) and purges it (a formatted receipt), sees
 * the provisions and stops kept on the jobs page, reads the failed job's error and retries it, filters the
 * audit log (the refused stop with its reason) and exports it as CSV, and a viewer
 * sees everything but can change nothing. Files, skills, MCP servers and the events filter are in
 * workspace-tabs.test.ts. Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and skips elsewhere.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { addMember } from "@/server/modules/member/member.data";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { acquireLeaseLocked } from "@/server/modules/workspace/workspace-lifecycle.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { getQueues } from "@/server/queue/queues";
import type { BerthServer } from "./support/berth-server";
import { downloadedText, HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { signedInPages } from "./support/signed-in";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const LEASE = {
  holder: "e2e:turn-1",
  reason: "e2e: a chat turn is running",
  expiresAt: new Date(Date.now() + 3_600_000),
};
const shot = screenshotter("workspaces");

describe.skipIf(!HAS_CHROMIUM)("workspaces and jobs pages, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let liveId: string;
  let lateId: string;
  let open: ReturnType<typeof signedInPages>;

  /** Runs a provision job in the server's workers and resolves (or rejects) when it has finished. */
  async function provision(workspaceId: string, reason: string) {
    const events = await getQueues().events("workspace");
    const job = await createEnqueue(processBerth().queues)("workspace.provision", {
      tenantId: tenant.scope.tenantId,
      workspaceId,
      reason,
    });
    await job.waitUntilFinished(events, 60_000);
  }

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    open = signedInPages(app, browser, tenant.slug);
    const suffix = tenant.slug.slice("e2e-".length);
    liveId = `ws-live-${suffix}`;
    lateId = `ws-late-${suffix}`;
    // A workspace provisioned for real by the workers (local backend, in the app's data dir), then leased as a turn would.
    await upsertWorkspaceBinding(
      tenant.scope,
      {
        id: liveId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    await provision(liveId, "e2e: first use");
    expect((await getWorkspace(tenant.scope, liveId, processBerth().db)).state).toBe("READY");
    await acquireLeaseLocked(tenant.scope, liveId, LEASE, processBerth().db);
    // A provision job for a workspace with no record yet: not retryable, so it fails at once.
    await expect(provision(lateId, "e2e: too early")).rejects.toThrow(/not found/);
  });

  afterAll(async () => {
    printScreenshotListing("workspaces");
    await closeProcessBerth();
    await e2e?.close();
  });

  const rowOf = (page: Page, testId: string, text: string) =>
    page.getByTestId(testId).filter({ hasText: text });
  const stateIn = (scope: ReturnType<Page["getByTestId"]>, state: string) =>
    scope.getByTestId("workspace-state").filter({ hasText: new RegExp(`^${state}$`) });

  it("lists the tenant's workspaces and filters them on the server by state and leases", async () => {
    const { page, pageErrors } = await open("/workspaces", tenant);
    const live = rowOf(page, "workspace-row", liveId);
    await stateIn(live, "ready").waitFor();
    // The local backend is confined by bubblewrap by default: no "trusted only" badge.
    expect(await live.textContent()).toContain("local");
    expect(await live.textContent()).not.toContain("trusted only");
    const seeded = rowOf(page, "workspace-row", "ws-e2e-");
    await stateIn(seeded, "pending").waitFor();
    // The seeded workspace belongs to no agent's record; its sessions' agent is shown by name elsewhere.
    expect(await page.getByTestId("workspace-row").count()).toBe(2);
    expect(await live.getByTestId("workspace-leases").textContent()).toBe("1");
    await shot(page, "list");

    // Named from its row (the shared rename dialog): the list shows the name, the record keeps it.
    await live.getByRole("button", { name: `Rename ${liveId}` }).click();
    const rename = page.getByRole("form", { name: `Rename ${liveId}` });
    await rename.getByLabel("Name").fill("build box");
    await rename.getByRole("button", { name: "Save" }).click();
    await vi.waitFor(async () =>
      expect(await live.getByTestId("workspace-label").textContent()).toBe("build box"),
    );

    await page.getByLabel("Filter by state").selectOption({ label: "pending" });
    await vi.waitFor(async () => expect(await page.getByTestId("workspace-row").count()).toBe(1));
    await seeded.waitFor();
    await page.getByLabel("Filter by state").selectOption({ label: "All states" });
    await page.getByLabel("Filter by leases").selectOption({ label: "Leased now" });
    await vi.waitFor(async () => expect(await page.getByTestId("workspace-row").count()).toBe(1));
    await live.waitFor();
    await shot(page, "list-filtered-leased");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("shows the overview and events tabs, refuses a stop while leased, force-stops and purges with a receipt", async () => {
    const { page, pageErrors } = await open("/workspaces", tenant);
    await page.getByRole("link", { name: liveId }).click();
    await page.waitForURL(new RegExp(`/workspaces/${liveId}$`));
    const summary = page.getByTestId("workspace-summary");
    await stateIn(summary, "ready").waitFor();
    const lease = page.getByTestId("lease-row");
    expect(await lease.count()).toBe(1);
    expect(await lease.textContent()).toContain(LEASE.holder);
    expect(await page.getByTestId("state-reason").textContent()).toContain("provisioned");
    await shot(page, "overview");

    await page.getByRole("tab", { name: "Events" }).click();
    await page.waitForURL(/\?tab=events$/);
    await rowOf(page, "event-row", "e2e: first use").filter({ hasText: "PENDING → PROVISIONING" }).waitFor();
    await rowOf(page, "event-row", "lease_acquired").filter({ hasText: LEASE.reason }).waitFor();
    await page.getByRole("tab", { name: "Overview" }).click();

    // Leased: the API refuses a plain stop, and the dialog says why instead of breaking.
    await page.getByRole("button", { name: "Stop…" }).click();
    const stopForm = page.getByRole("form", { name: "Confirm stop" });
    await stopForm.getByLabel("Reason").fill("e2e: admin stop");
    await stopForm.getByRole("button", { name: "Confirm stop" }).click();
    await stopForm.getByTestId("action-error").filter({ hasText: "in use" }).waitFor();
    await shot(page, "stop-refused");
    await stopForm.getByLabel(/Force/).check();
    await stopForm.getByRole("button", { name: "Confirm stop" }).click();
    // The request, or already its outcome: a fast worker can finish before the page's next poll.
    await page
      .getByTestId("action-result")
      .filter({ hasText: /^(Stop requested|Stopped)/ })
      .waitFor();
    await stateIn(summary, "stopped").waitFor();
    // Settled in the new state: the note now says the outcome.
    await page
      .getByTestId("action-result")
      .filter({ hasText: /^Stopped: files stay/ })
      .waitFor();
    expect(await page.getByTestId("state-reason").textContent()).toContain("e2e: admin stop");
    expect((await getWorkspace(tenant.scope, liveId, processBerth().db)).state).toBe("STOPPED");

    // Purge asks for the id to be typed before it can be confirmed.
    await page.getByRole("button", { name: "Purge…" }).click();
    const purgeForm = page.getByRole("form", { name: "Confirm purge" });
    const purgeButton = purgeForm.getByRole("button", { name: "Purge generation 1" });
    expect(await purgeButton.isDisabled()).toBe(true);
    await purgeForm.getByLabel("Workspace id").fill(liveId);
    await purgeForm.getByLabel(/Force/).check();
    await shot(page, "purge-dialog");
    await purgeButton.click();
    await stateIn(summary, "purged").waitFor();
    await page.getByTestId("action-result").filter({ hasText: "Generation 1 purged" }).waitFor();
    expect(await page.getByTestId("lease-row").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Purge…" }).isDisabled()).toBe(true);

    await page.getByRole("tab", { name: "Receipts" }).click();
    const receipt = page.getByTestId("purge-receipt");
    await receipt.waitFor();
    expect(await receipt.getByTestId("purge-receipt-by").textContent()).toContain(tenant.email);
    expect(await receipt.textContent()).toContain("Generation 1 purged");
    expect(await receipt.textContent()).toContain("Skills deleted");
    await shot(page, "receipt");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("keeps provisions and stops on the jobs page, shows a failed job's error and retries it", async () => {
    const { page, pageErrors } = await open("/jobs", tenant);
    // The live workspace's finished jobs are still listed (retention window), each completed.
    for (const name of ["workspace.provision", "workspace.stop", "workspace.purge"]) {
      await rowOf(page, "job-row", liveId)
        .filter({ hasText: name })
        .getByTestId("job-state")
        .filter({ hasText: /^completed$/ })
        .waitFor();
    }
    const failed = rowOf(page, "job-row", lateId);
    await failed
      .getByTestId("job-state")
      .filter({ hasText: /^failed$/ })
      .waitFor();
    expect(await failed.textContent()).toContain("workspace.provision");
    expect(await failed.getByTestId("job-error").textContent()).toMatch(/not found/);
    await shot(page, "jobs-failed");

    // Now that the record exists, the same job can succeed: Retry puts it back in the queue.
    await upsertWorkspaceBinding(
      tenant.scope,
      {
        id: lateId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    await failed.getByRole("button", { name: "Retry" }).click();
    await failed
      .getByTestId("job-state")
      .filter({ hasText: /^completed$/ })
      .waitFor();
    expect((await getWorkspace(tenant.scope, lateId, processBerth().db)).state).toBe("READY");
    await shot(page, "jobs-retried");

    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Workspaces" }).click();
    await stateIn(rowOf(page, "workspace-row", lateId), "ready").waitFor();
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("filters the audit log on the server, with the refused stop's reason, and exports the same rows as CSV", async () => {
    // The audit buffer is flushed into the table by the server's in-process workers.
    const stops = { tenantId: tenant.scope.tenantId, action: "workspace.stop" };
    await vi.waitFor(async () => expect(await getDb().auditLog.count({ where: stops })).toBe(2), {
      timeout: 30_000,
      interval: 200,
    });
    const { page, pageErrors } = await open("/audit", tenant);
    await page.getByTestId("audit-row").first().waitFor();
    await page.getByLabel("Filter by action").selectOption("workspace.stop");
    await vi.waitFor(async () => expect(await page.getByTestId("audit-row").count()).toBe(2));
    await page.getByLabel("Filter by outcome").selectOption("failure");
    await vi.waitFor(async () => expect(await page.getByTestId("audit-row").count()).toBe(1));
    const refused = page.getByTestId("audit-row");
    expect(await refused.getByTestId("audit-reason").textContent()).toContain("The workspace is in use");
    expect(await refused.getByTestId("audit-actor").textContent()).toBe(tenant.email);
    expect(await refused.getByRole("link").getAttribute("href")).toBe(
      `/t/${tenant.slug}/workspaces/${liveId}`,
    );
    await shot(page, "audit-filtered");

    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Export CSV" }).click(),
    ]);
    const lines = (await downloadedText(download)).trim().split("\r\n");
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain(",workspace.stop,");
    expect(lines[1]).toContain(tenant.email);
    expect(lines[1]).toContain(",failure,");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("shows a viewer the workspaces but no usable Stop/Purge or file changes, and says why jobs are closed", async () => {
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: app.url,
      prisma: getDb(),
      log: () => {},
    });
    const suffix = tenant.slug.slice("e2e-".length);
    const viewer = { email: `viewer-${suffix}@example.test`, password: `pw-viewer-${suffix}` };
    const { owner } = await createTenantWithOwner(
      auth,
      {
        tenantName: `Viewer home ${suffix}`,
        slug: `e2e-viewer-${suffix}`,
        name: "E2E Viewer",
        ...viewer,
      },
      processBerth().db,
    );
    await addMember(tenant.scope, { userId: owner.id, role: "viewer" }, processBerth().db);

    const { page, pageErrors } = await open(`/workspaces/ws-e2e-${suffix}`, viewer);
    await stateIn(page.getByTestId("workspace-summary"), "pending").waitFor();
    await page.getByTestId("actions-role-note").filter({ hasText: "you are viewer" }).waitFor();
    expect(await page.getByRole("button", { name: "Stop…" }).isDisabled()).toBe(true);
    expect(await page.getByRole("button", { name: "Purge…" }).isDisabled()).toBe(true);
    await page.getByRole("tab", { name: "Receipts" }).click();
    await page.getByText("Purge receipts are visible to admins only.").waitFor();
    await page.getByRole("tab", { name: "Files" }).click();
    await page.getByTestId("contents-note").waitFor();

    // A ready workspace: the viewer sees its files, skills and MCP servers but cannot change them.
    await page.goto(`${app.url}/t/${tenant.slug}/workspaces/${lateId}?tab=files`);
    await page.getByTestId("file-row").first().waitFor();
    expect(await page.getByRole("button", { name: "Upload", exact: true }).isDisabled()).toBe(true);
    expect(await page.getByRole("button", { name: "New folder" }).isDisabled()).toBe(true);
    await page.getByText("Changing files needs the member role; you are viewer.").waitFor();
    await page.getByRole("tab", { name: "Skills" }).click();
    await page.getByText("Changing skills needs the member role; you are viewer.").waitFor();
    const upload = page.getByRole("form", { name: "Upload a skill" });
    expect(await upload.getByRole("button", { name: "Upload folder" }).isDisabled()).toBe(true);
    await page.getByRole("tab", { name: "MCP servers" }).click();
    await page.getByText("Changing MCP servers needs the member role; you are viewer.").waitFor();
    const addMcp = page.getByRole("form", { name: "Add an MCP server" });
    expect(await addMcp.getByRole("button", { name: "Add" }).isDisabled()).toBe(true);
    await shot(page, "viewer-mcp");

    // Jobs are the admins': the viewer's sidebar does not offer them, and the address typed by hand says
    // which role the page takes instead of showing a page of refusals.
    const nav = page.getByRole("navigation", { name: "Tenant" });
    await nav.getByRole("link", { name: "Workspaces" }).waitFor();
    expect(await nav.getByRole("link", { name: "Jobs" }).count()).toBe(0);
    await page.goto(`${app.url}/t/${tenant.slug}/jobs`);
    await page
      .getByTestId("role-required")
      .filter({ hasText: /admin role/ })
      .waitFor();
    expect(await page.getByTestId("job-row").count()).toBe(0);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
  it("changes a badge live when the API stops a workspace elsewhere, stops two at once and filters by state", async () => {
    const suffix = tenant.slug.slice("e2e-".length);
    const [outsideId, bulkA, bulkB] = ["outside", "bulk-a", "bulk-b"].map((name) => `ws-${name}-${suffix}`);
    for (const id of [outsideId!, bulkA!, bulkB!]) {
      await upsertWorkspaceBinding(
        tenant.scope,
        { id, backendKind: "local", isolationPolicy: "PER_AGENT" },
        { config: processBerth().config.quotas },
        processBerth().db,
      );
      await provision(id, "e2e: live list");
    }
    const { page, pageErrors } = await open("/workspaces", tenant);
    // The page's change stream is connected: from here on nothing polls (every workspace is READY).
    await page.locator('[data-testid="live-status"][data-live-status="live"]').waitFor();
    for (const id of [outsideId!, bulkA!, bulkB!])
      await stateIn(rowOf(page, "workspace-row", id), "ready").waitFor();

    // Stopped through the HTTP API by another client (the same user's session, not this page).
    const stopped = await page.context().request.post(`${app.url}/api/trpc/workspace.stop`, {
      headers: { "content-type": "application/json", origin: app.url },
      data: JSON.stringify({ json: { tenantSlug: tenant.slug, workspaceId: outsideId } }),
    });
    expect(stopped.status(), await stopped.text()).toBe(200);
    await stateIn(rowOf(page, "workspace-row", outsideId!), "stopped").waitFor({ timeout: 30_000 });
    await shot(page, "live-badge-stopped");

    // Bulk stop of two: each row's outcome is reported, and both badges follow.
    await page.getByLabel(`Select ${bulkA}`).check();
    await page.getByLabel(`Select ${bulkB}`).check();
    const bar = page.getByTestId("bulk-bar");
    await bar.filter({ hasText: "2 selected" }).waitFor();
    await bar.getByRole("button", { name: "Stop" }).click();
    const outcomes = page.getByTestId("bulk-outcome");
    await vi.waitFor(async () => expect(await outcomes.count()).toBe(2));
    for (const id of [bulkA!, bulkB!]) {
      const outcome = outcomes.filter({ hasText: id });
      expect(await outcome.getAttribute("data-ok")).toBe("true");
      expect(await outcome.textContent()).toContain("stop requested");
      await stateIn(rowOf(page, "workspace-row", id), "stopped").waitFor({ timeout: 30_000 });
    }
    await shot(page, "bulk-stopped");

    // The state filter (on the server) shows exactly the three stopped ones.
    await page.getByLabel("Filter by state").selectOption({ label: "stopped" });
    await vi.waitFor(async () => expect(await page.getByTestId("workspace-row").count()).toBe(3));
    for (const id of [outsideId!, bulkA!, bulkB!]) await rowOf(page, "workspace-row", id).waitFor();
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
