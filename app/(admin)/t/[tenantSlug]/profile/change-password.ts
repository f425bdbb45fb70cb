"use client";

import { useState } from "react";
import { useTRPCClient } from "@/app/_trpc/client";

/**
 * Changing one's password, in one place: `account.changePassword`, which checks the current password,
 * always ends the user's other sessions (whoever knew the old password is signed out everywhere else),
 * renews this tab's session cookie and is audited.
 */
export function useChangePassword() {
  const client = useTRPCClient();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function change(currentPassword: string, newPassword: string): Promise<boolean> {
    setPending(true);
    setError(null);
    try {
      await client.account.changePassword.mutate({ currentPassword, newPassword });
      return true;
    } catch (failure) {
      setError(
        failure instanceof Error
          ? failure.message
          : "Could not reach Berth. Check your connection and try again.",
      );
      return false;
    } finally {
      setPending(false);
    }
  }

  /** Forgets the last refusal (the form calls it on every edit, so a fixed field loses its message). */
  const clearError = () => setError(null);
  return { change, pending, error, clearError };
}
