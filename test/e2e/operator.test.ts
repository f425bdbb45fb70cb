/**
 * Operators in the browser (issue 15): the operator creates a tenant on the operator pages, copies the owner
 * invitation link; the owner opens it in another browser, sets a name and password, lands in the new tenant
 * as its owner and signs in again with them; the operator sees the owner and suspends and resumes the
 * tenant. The new owner (a tenant admin, not an operator) gets the not-found page for /operator. Real server
 * (`npm start`'s composition), Postgres, Redis and Chromium; screenshots in test-results/screenshots/.
 */
import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { grantOperator } from "@/server/modules/operator/operator.service";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const shot = screenshotter("operator");

describe.skipIf(!HAS_CHROMIUM)("operators: create a tenant whose owner accepts the invitation", () => {
  let app: BerthServer;
  let browser: Browser;
  let seeded: SeededTenant;
  let e2e: E2eApp;
  let operator: Page;
  const pageErrors: string[][] = [];
  const suffix = randomUUID().slice(0, 8);
  const newTenant = { name: `Harbor ${suffix}`, slug: `harbor-${suffix}` };
  const owner = { name: "Ada Owner", email: `ada-${suffix}@example.test`, password: "owner-password-1" };
  let inviteLink = "";
  /** The owner's signed-in page, kept for the suspension check. */
  let ownerPage: Page;

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant: seeded } = e2e);
    // The seeded admin is made an operator the way a script would (npm run berth -- operator grant).
    await grantOperator(cliOperatorActor(), { email: seeded.email }, processBerth().db);
    const watched = await watchedPage(await browser.newContext({ viewport: { width: 1366, height: 900 } }));
    operator = watched.page;
    pageErrors.push(watched.pageErrors);
    await operator.goto(`${app.url}/sign-in`);
    await submitSignIn(operator, seeded.email, seeded.password);
    await operator.waitForURL(new RegExp(`/t/${seeded.slug}$`));
  });

  afterAll(async () => {
    await e2e?.close();
    printScreenshotListing("operator");
  });

  it("creates a tenant from the operator pages and shows the owner invitation link once", async () => {
    await operator.getByTestId("operator-link").click();
    await operator.waitForURL(/\/operator$/);
    await operator.getByTestId("tenant-row").filter({ hasText: seeded.slug }).waitFor();
    await operator.getByRole("button", { name: "New tenant" }).click();
    const form = operator.getByRole("form", { name: "Create tenant" });
    await form.getByLabel("Name").fill(newTenant.name);
    await form.getByLabel("Slug").fill(newTenant.slug);
    await form.getByLabel("Owner").fill(owner.name);
    await form.getByRole("button", { name: "Create tenant" }).click();
    inviteLink = (await operator.getByTestId("owner-invite-link").textContent()) ?? "";
    expect(inviteLink).toMatch(new RegExp(`^${app.url}/invite/berth_inv_`));
    await shot(operator, "tenant-created");
    await operator.getByRole("button", { name: "Done" }).click();
    const row = operator.getByTestId("tenant-row").filter({ hasText: newTenant.slug });
    await row.waitFor();
    expect(await row.textContent()).toContain("active");
    expect(await operator.content()).not.toContain(inviteLink.split("/invite/")[1]);
    await shot(operator, "tenants");
  });

  it("lets the owner accept the invitation, land in the tenant as owner, and sign in again", async () => {
    const watched = await watchedPage(await browser.newContext({ viewport: { width: 1366, height: 900 } }));
    const page = watched.page;
    pageErrors.push(watched.pageErrors);
    await page.goto(inviteLink);
    await page.getByRole("heading", { name: `Join ${newTenant.name}` }).waitFor();
    const form = page.getByRole("form", { name: "Accept invitation" });
    await form.getByLabel("Name").fill(owner.name);
    await form.getByLabel("Email").fill(owner.email);
    await form.getByLabel("Password", { exact: true }).fill(owner.password);
    await form.getByLabel("Confirm password").fill(owner.password);
    await form.getByRole("button", { name: "Join" }).click();
    await page.waitForURL(new RegExp(`/t/${newTenant.slug}$`));
    expect(await page.getByTestId("tenant-role").textContent()).toBe("owner");
    expect(await page.getByTestId("tenant-name").textContent()).toBe(newTenant.name);
    await shot(page, "owner-landed");
    await page.context().close();

    // A fresh browser: the owner signs in with the email and password they chose.
    const again = await watchedPage(await browser.newContext());
    pageErrors.push(again.pageErrors);
    await again.page.goto(`${app.url}/sign-in`);
    await submitSignIn(again.page, owner.email, owner.password);
    await again.page.waitForURL(new RegExp(`/t/${newTenant.slug}$`));
    // The owner of one tenant is not an operator: no link, and /operator does not exist for them.
    expect(await again.page.getByTestId("operator-link").count()).toBe(0);
    await again.page.goto(`${app.url}/operator`);
    await again.page.getByRole("heading", { name: "Page not found" }).waitFor();
    expect(await again.page.content()).not.toContain(seeded.slug);
    // Nor another tenant's operator page, named by its id.
    await again.page.goto(`${app.url}/operator/tenants/${seeded.scope.tenantId}`);
    await again.page.getByRole("heading", { name: "Page not found" }).waitFor();
    expect(await again.page.content()).not.toContain(seeded.name);
    ownerPage = again.page;
  });

  it("shows the operator the new owner, and suspends and resumes the tenant", async () => {
    await operator.goto(`${app.url}/operator`);
    await operator.getByTestId("tenant-row").filter({ hasText: newTenant.slug }).getByRole("link").click();
    await operator.waitForURL(/\/operator\/tenants\//);
    await operator.getByTestId("tenant-owner").filter({ hasText: owner.email }).waitFor();
    await operator.getByRole("button", { name: "Suspend" }).click();
    await operator.getByTestId("confirm-dialog").getByRole("button", { name: "Suspend" }).click();
    await operator.getByTestId("tenant-status").filter({ hasText: "suspended" }).waitFor();
    const row = await getDb().tenant.findUnique({ where: { slug: newTenant.slug } });
    expect(row?.status).toBe("suspended");
    await shot(operator, "tenant-suspended");
    // The owner's dashboard says why instead of failing each page.
    await ownerPage.goto(`${app.url}/t/${newTenant.slug}`);
    await ownerPage.getByTestId("tenant-suspended").filter({ hasText: "is suspended" }).waitFor();
    await shot(ownerPage, "owner-sees-suspension");
    await operator.getByRole("button", { name: "Resume" }).click();
    await operator.getByTestId("tenant-status").filter({ hasText: "active" }).waitFor();
    await operator.getByTestId("tenant-operator-audit").filter({ hasText: "tenant.resume" }).waitFor();
    await ownerPage.reload();
    await ownerPage.getByTestId("tenant-role").filter({ hasText: "owner" }).waitFor();
    await shot(operator, "tenant-detail");
    expect(pageErrors.flat()).toEqual([]);
  });

  it("sets a tenant's quotas from its page: the owner sees them as the tenant's own, blank restores the default", async () => {
    const form = operator.getByRole("form", { name: "Tenant quotas" });
    const live = form.getByLabel("live workspaces", { exact: true });
    expect(await live.inputValue()).toBe("");
    await live.fill("3");
    await form.getByLabel("memory per workspace", { exact: true }).fill("512");
    await form.getByRole("button", { name: "Save quotas" }).click();
    await operator.getByTestId("tenant-operator-audit").filter({ hasText: "tenant.quota.update" }).waitFor();
    const tenantRow = await getDb().tenant.findUniqueOrThrow({ where: { slug: newTenant.slug } });
    const stored = await getDb().tenantQuota.findUniqueOrThrow({ where: { tenantId: tenantRow.id } });
    expect(stored).toMatchObject({ liveWorkspaces: 3, workspaceMemoryBytes: 512n * 1024n * 1024n });
    // A value the limits refuse is an error on the form, and nothing changes.
    await live.fill("-1");
    await form.getByRole("button", { name: "Save quotas" }).click();
    await operator.getByTestId("tenant-quotas-error").filter({ hasText: "liveWorkspaces" }).waitFor();

    await ownerPage.goto(`${app.url}/t/${newTenant.slug}/settings`);
    const ownRow = ownerPage.getByTestId("settings-quotas").getByTestId("quota-liveWorkspaces");
    await ownRow.filter({ hasText: /of 3$/ }).waitFor();
    expect(await ownRow.textContent()).toMatch(/tenant/);

    await operator.reload();
    await live.waitFor();
    expect(await live.inputValue()).toBe("3");
    await live.fill("");
    await form.getByRole("button", { name: "Save quotas" }).click();
    await vi.waitFor(async () =>
      expect(
        (await getDb().tenantQuota.findUniqueOrThrow({ where: { tenantId: tenantRow.id } })).liveWorkspaces,
      ).toBeNull(),
    );
    await shot(operator, "tenant-quotas");
    expect(pageErrors.flat()).toEqual([]);
  });
});
