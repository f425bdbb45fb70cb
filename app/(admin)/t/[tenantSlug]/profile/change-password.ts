"use client";

import { useState } from "react";

type ErrorBody = { message?: string; code?: string };

/**
 * Changing one's password, in one place: better-auth's endpoint with `revokeOtherSessions`, so whoever
 * knew the old password is signed out everywhere else. (When the `account.changePassword` procedure lands
 * — it always ends the other sessions and is audited — only this hook changes.)
 */
export function useChangePassword() {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function change(currentPassword: string, newPassword: string): Promise<boolean> {
    setPending(true);
    setError(null);
    try {
      const response = await fetch("/api/auth/change-password", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ currentPassword, newPassword, revokeOtherSessions: true }),
      });
      if (response.ok) return true;
      const body = (await response.json().catch(() => null)) as ErrorBody | null;
      setError(
        body?.code === "INVALID_PASSWORD"
          ? "The current password is not right."
          : (body?.message ?? `The password could not be changed (HTTP ${response.status}).`),
      );
      return false;
    } catch {
      setError("Could not reach Berth. Check your connection and try again.");
      return false;
    } finally {
      setPending(false);
    }
  }

  return { change, pending, error };
}
