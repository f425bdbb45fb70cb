import Link from "next/link";
import type { ReactNode } from "react";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Skeleton } from "@/app/_components/ui/skeleton";

/** One Overview picture: what it shows, where its list lives, and the chart (null while it loads). */
export type ChartCard = { title: string; description: string; href: string; link: string; chart: ReactNode };

export const hourLabel = (at: Date) => `${String(at.getUTCHours()).padStart(2, "0")}:00`;
export const dayLabel = (at: Date) => at.toISOString().slice(5, 10);

/** The Overview's chart cards, two to a row, each linking to the filtered list behind its picture. */
export function ChartCards({ cards, className }: { cards: ChartCard[]; className: string }) {
  return (
    <div className={`${className} grid gap-3 md:grid-cols-2`}>
      {cards.map((card) => (
        <Card key={card.title} aria-label={card.title}>
          <CardHeader>
            <div>
              <CardTitle>{card.title}</CardTitle>
              <CardDescription>
                {card.description}{" "}
                <Link className="underline-offset-2 hover:underline" href={card.href}>
                  {card.link}
                </Link>
              </CardDescription>
            </div>
          </CardHeader>
          <CardContent>{card.chart ?? <Skeleton className="h-48 w-full" />}</CardContent>
        </Card>
      ))}
    </div>
  );
}
