"use client";

import { LogOut } from "lucide-react";
import { useState } from "react";
import { Button } from "@/app/_components/ui/button";

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
    <Button
      variant="ghost"
      size="icon-sm"
      aria-label="Sign out"
      title="Sign out"
      disabled={pending}
      onClick={() => void signOut()}
    >
      <LogOut />
    </Button>
  );
}
