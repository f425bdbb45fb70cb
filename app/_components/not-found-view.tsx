import { FileQuestion } from "lucide-react";
import Link from "next/link";
import { Button } from "@/app/_components/ui/button";

/** "Nothing here", with a way back. Used inside the tenant shell and at the root. */
export function NotFoundView({ backHref, backLabel }: { backHref: string; backLabel: string }) {
  return (
    <div
      className="flex flex-col items-center justify-center gap-3 py-24 text-center"
      data-testid="not-found"
    >
      <div className="bg-muted flex size-12 items-center justify-center rounded-full">
        <FileQuestion className="text-muted-foreground size-6" />
      </div>
      <p className="text-muted-foreground font-mono text-xs">404</p>
      <h1 className="text-xl">Page not found</h1>
      <p className="text-muted-foreground max-w-sm text-sm">
        This page does not exist, or it belongs to a tenant you are not a member of.
      </p>
      <Button asChild variant="outline" className="mt-2">
        <Link href={backHref}>{backLabel}</Link>
      </Button>
    </div>
  );
}
