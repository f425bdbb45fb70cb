"use client";

import type { LucideIcon } from "lucide-react";
import Link from "next/link";
import { usePathname } from "next/navigation";
import { cn } from "./cn";

export type SideNavItem = {
  href: string;
  label: string;
  icon: LucideIcon;
  /** Whether the current path is this section (a section may own more paths than its own href). */
  isCurrent: (pathname: string) => boolean;
};

/** A shell's section links, the current one marked (`aria-current="page"`) and highlighted. */
export function SideNav({
  label,
  items,
  onNavigate,
}: {
  label: string;
  items: readonly SideNavItem[];
  onNavigate?: () => void;
}) {
  const pathname = usePathname();
  return (
    <nav className="flex flex-col gap-0.5" aria-label={label}>
      {items.map(({ href, label: itemLabel, icon: Icon, isCurrent }) => {
        const current = isCurrent(pathname);
        return (
          <Link
            key={href}
            href={href}
            onClick={onNavigate}
            aria-current={current ? "page" : undefined}
            className={cn(
              "text-muted-foreground hover:bg-accent hover:text-foreground flex h-8 items-center gap-2.5 rounded-md px-2.5 text-sm font-medium transition-colors",
              current && "bg-accent text-foreground",
            )}
          >
            <Icon className="size-4" aria-hidden />
            {itemLabel}
          </Link>
        );
      })}
    </nav>
  );
}
