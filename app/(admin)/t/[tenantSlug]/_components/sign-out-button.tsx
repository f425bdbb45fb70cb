"use client";

import { useState } from "react";

export function SignOutButton() {
  const [pending, setPending] = useState(false);
  async function signOut() {
    setPending(true);
    // better-auth clears the cookie session; a full navigation drops every cached query with it.
    await fetch("/api/auth/sign-out", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    window.location.assign("/sign-in");
  }
  return (
    <button type="button" className="link" disabled={pending} onClick={() => void signOut()}>
      Sign out
    </button>
  );
}
