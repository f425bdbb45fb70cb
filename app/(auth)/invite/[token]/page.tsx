import { processBerth } from "@/server/composition/process-berth";
import type { Metadata } from "next";
import Link from "next/link";
import { AuthCard } from "@/app/_components/auth-card";
import { Button } from "@/app/_components/ui/button";
import { previewInvite } from "@/server/modules/member/invite.service";
import { isAppError } from "@/server/shared/errors";
import { AcceptInviteForm } from "./accept-invite-form";

export const metadata: Metadata = { title: "Invitation" };
export const dynamic = "force-dynamic";

/** `/invite/<token>`: who invites you and as what, then a name, email and password to join. */
export default async function InvitePage({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  const preview = await previewInvite(decodeURIComponent(token), processBerth().db).catch(
    (error: unknown) => {
      if (isAppError(error) && (error.code === "NOT_FOUND" || error.code === "BAD_REQUEST")) return null;
      // Suspended: the link stays valid and works again once the operator resumes the tenant. Being deleted:
      // the link will never work again.
      if (isAppError(error) && error.code === "FORBIDDEN")
        return error.details?.reason === "tenant_suspended" ? ("suspended" as const) : null;
      throw error;
    },
  );
  if (preview === "suspended") {
    return (
      <AuthCard
        title="Invitation on hold"
        description="This tenant is suspended by the operator of this installation. The link works again once they resume it."
      >
        <Button asChild variant="outline" className="w-full">
          <Link href="/sign-in">Go to sign in</Link>
        </Button>
      </AuthCard>
    );
  }
  if (!preview) {
    return (
      <AuthCard
        title="Invitation not valid"
        description="This link was already used, revoked or has expired. Ask an admin of the tenant for a new one."
      >
        <Button asChild variant="outline" className="w-full">
          <Link href="/sign-in">Go to sign in</Link>
        </Button>
      </AuthCard>
    );
  }
  return (
    <AuthCard
      title={`Join ${preview.tenantName}`}
      description={
        <>
          You are invited as <strong className="text-foreground">{preview.role}</strong>. Choose your name and
          a password; you sign in with this email afterwards.
        </>
      }
    >
      <AcceptInviteForm token={decodeURIComponent(token)} />
    </AuthCard>
  );
}
