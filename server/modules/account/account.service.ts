import type { Db } from "@/server/db";
import { isAPIError } from "better-auth/api";
import { z } from "zod";
import type { BerthAuth } from "@/server/auth/auth";
import { findUserTenantsByEmailForGate } from "@/server/auth/gate.data";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import { currentRequestMeta } from "@/server/shared/request-meta";

export const ZChangePasswordInput = z
  .object({
    currentPassword: z.string().min(1).max(256),
    newPassword: z.string().min(8).max(256),
  })
  // "Changed" to the same password would end the other sessions yet leave the old password valid.
  .refine((input) => input.newPassword !== input.currentPassword, {
    path: ["newPassword"],
    message: "must differ from the current password",
  });

/**
 * The signed-in user's own account. `changePassword` checks the current password, stores the new one and
 * ENDS EVERY OTHER SESSION of the user (better-auth's changePassword with revokeOtherSessions, always on:
 * someone who learnt the old password must not stay signed in). The caller's own session is replaced by a
 * fresh one, whose cookie comes back in the returned `setCookies` (the transport forwards them). Audited in
 * every tenant the user belongs to. Only cookie sessions: an API key has no password.
 */
export async function changePassword(
  auth: BerthAuth,
  caller: { userId: string; email: string; headers: Headers },
  raw: z.input<typeof ZChangePasswordInput>,
  /** Where the change is audited, in each of the user's tenants (the root's `berth.audit`). */
  recorder: AuditRecorder,
  db: Db,
): Promise<{ changed: true; setCookies: string[] }> {
  const input = parseInput(ZChangePasswordInput, raw);
  let setCookies: string[];
  try {
    const { headers } = await auth.api.changePassword({
      body: { ...input, revokeOtherSessions: true },
      headers: caller.headers,
      returnHeaders: true,
    });
    setCookies = headers.getSetCookie();
  } catch (error) {
    await audit(recorder, caller.email, "failure", db);
    if (isAPIError(error) && error.status === "BAD_REQUEST") {
      throw new AppError("BAD_REQUEST", `change password refused: ${error.message}`, {
        userMessage:
          error.body?.code === "INVALID_PASSWORD" ? "The current password is wrong." : error.message,
        details: { code: error.body?.code ?? null },
      });
    }
    if (isAPIError(error) && error.status === "UNAUTHORIZED") {
      throw new AppError("UNAUTHORIZED", "no session for change password", {
        userMessage: "Sign in again to change your password.",
      });
    }
    throw error;
  }
  await audit(recorder, caller.email, "success", db);
  return { changed: true, setCookies };
}

async function audit(
  recorder: AuditRecorder,
  email: string,
  outcome: "success" | "failure",
  db: Db,
): Promise<void> {
  const account = await findUserTenantsByEmailForGate(email, db);
  if (!account) return;
  const meta = currentRequestMeta();
  for (const tenantId of account.tenantIds) {
    await recorder
      .record(await resolveSystemTenantScope(tenantId, { allowSuspended: true }, db), {
        action: "account.change-password",
        targetType: "user",
        targetId: account.userId,
        outcome,
        actor: { type: "user", id: account.userId },
        ip: meta?.ip ?? null,
        userAgent: meta?.userAgent ?? null,
        details: { otherSessionsRevoked: outcome === "success" },
      })
      .catch(() => undefined);
  }
}
