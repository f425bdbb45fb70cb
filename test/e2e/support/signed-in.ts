import type { Browser, BrowserContext, Page } from "playwright-core";
import type { BerthServer } from "./berth-server";
import { submitSignIn, watchedPage } from "./e2e-app";

export type User = { email: string; password: string };

/**
 * Signed-in pages, one browser context per user: the sign-in endpoint is rate limited, so each user signs in
 * once and later pages reuse the context's cookie. Uncaught page errors are collected for the test to check.
 */
export function signedInPages(app: BerthServer, browser: Browser, tenantSlug: string) {
  const contexts = new Map<string, BrowserContext>();
  return async function open(pathname: string, user: User): Promise<{ page: Page; pageErrors: string[] }> {
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
    // Right after the sign-in the page may already be there (the tenant's overview).
    const target = `${app.url}/t/${tenantSlug}${pathname}`;
    if (page.url() !== target) await page.goto(target);
    return { page, pageErrors };
  };
}
