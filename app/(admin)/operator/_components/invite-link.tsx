"use client";

import { OneTimeLink } from "@/app/_components/ui/one-time-link";

/** An owner invitation link, shown once (only its hash is stored). */
export function InviteLinkBox({ path }: { path: string }) {
  return (
    <OneTimeLink
      notice="Owner invitation created. Copy the link now: it is shown only once."
      link={`${window.location.origin}${path}`}
      testId="owner-invite-link"
    />
  );
}
