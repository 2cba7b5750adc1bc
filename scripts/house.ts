// The house of @klym/core, drawn from its imports: `node scripts/house.ts` (no build needed; it reads the sources).
//   rooms    the folders of packages/core/src that hold source files (tests and the entry points left out: the
//            entry points, package.json's `exports`, are the front doors and import every room on purpose)
//   arrows   folder → folder: some file in the first imports some file in the second (types included)
//   floors   the layering of the folder graph: a room stands above every room it imports, save for the arrows that
//            run back up; floor 0 imports no other room
//   back up  the fewest arrows that, turned round, leave no circle among rooms (found exactly per circle of rooms),
//            each listed with the imports behind it: the arrows to fix
//   circles  strongly connected components of rooms, and of files
// `--json` prints the figures as one JSON object instead. `--max-back-up N` fails (exit 1) when more than N arrows
// run back up (`pnpm check` keeps it at 6).
import { readFileSync, readdirSync, type Dirent } from 'node:fs';
import path from 'node:path';

const core = path.resolve(import.meta.dirname, '../packages/core');
const source = path.join(core, 'src');
const json = process.argv.includes('--json');
const maxAt = process.argv.indexOf('--max-back-up');
const maxBackUp = maxAt < 0 ? undefined : Number(process.argv[maxAt + 1]);
if (maxBackUp !== undefined && !Number.isInteger(maxBackUp)) throw new Error(`--max-back-up takes a whole number, got ${process.argv[maxAt + 1]}`);

const manifest = JSON.parse(readFileSync(path.join(core, 'package.json'), 'utf8')) as {
  exports: Record<string, { 'klym-source'?: string }>;
};
const doors = new Set(Object.values(manifest.exports).flatMap((entry) => (entry['klym-source'] ? [path.resolve(core, entry['klym-source'])] : [])));

const isSource = (name: string): boolean => name.endsWith('.ts') && !/\.test(-support)?\.ts$|\.test\.ts$|\.d\.ts$/.test(name);
const files = (readdirSync(source, { recursive: true, withFileTypes: true }) as Dirent[])
  .filter((entry) => entry.isFile() && isSource(entry.name))
  .map((entry) => path.join(entry.parentPath, entry.name))
  .filter((file) => !doors.has(file) && !/\.test\./.test(file))
  .toSorted();
const known = new Set(files);
const rel = (file: string): string => path.relative(source, file);
const roomOf = (file: string): string => path.dirname(rel(file));

const SPECIFIER = /\bfrom\s*['"](\.{1,2}\/[^'"]+)['"]|\bimport\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;
/** The source files a file imports (relative specifiers only: packages are outside the house). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
  const out = new Set<string>();
  for (const match of text.matchAll(SPECIFIER)) {
    const target = path.resolve(path.dirname(file), (match[1] ?? match[2])!);
    if (known.has(target)) out.add(target);
  }
  return [...out];
}
const fileEdges = new Map(files.map((file) => [file, importsOf(file)]));

/** Tarjan's strongly connected components, each sorted; the components in reverse topological order. */
function components(nodes: string[], next: (node: string) => Iterable<string>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const to of next(node)) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let top: string;
      do {
        top = stack.pop()!;
        onStack.delete(top);
        component.push(top);
      } while (top !== node);
      out.push(component.toSorted());
    }
  };
  for (const node of nodes) if (!index.has(node)) visit(node);
  return out;
}

// Rooms and arrows, each arrow with the file imports behind it.
const rooms = [...new Set(files.map(roomOf))].toSorted();
const arrows = new Map<string, Map<string, string[]>>(rooms.map((room) => [room, new Map()]));
for (const [file, targets] of fileEdges) {
  for (const target of targets) {
    const from = roomOf(file);
    const to = roomOf(target);
    if (from === to) continue;
    const behind = arrows.get(from)!.get(to) ?? [];
    behind.push(`${rel(file)} → ${rel(target)}`);
    arrows.get(from)!.set(to, behind);
  }
}
const arrowCount = [...arrows.values()].reduce((sum, targets) => sum + targets.size, 0);

/** How many bits a mask has set. */
function popcount(mask: number): number {
  let count = 0;
  for (let rest = mask; rest; rest &= rest - 1) count++;
  return count;
}

/**
 * Orders one circle of rooms bottom-up so that the fewest arrows run back up (an arrow runs back up when it points at
 * a room placed above its own): exact, by dynamic programming over the subsets placed so far; a circle of more than
 * 20 rooms falls back to the order found so far, greedily.
 */
function orderCircle(circle: string[]): string[] {
  const n = circle.length;
  if (n === 1) return circle;
  // importers[v]: the rooms of the circle that import circle[v], as a bit mask.
  const importers = circle.map((room) => circle.reduce((mask, other, bit) => (arrows.get(other)!.has(room) ? mask | (1 << bit) : mask), 0));
  if (n > 20) {
    const placed: number[] = [];
    let mask = 0;
    while (placed.length < n) {
      let best = -1;
      for (let v = 0; v < n; v++) {
        if (mask & (1 << v)) continue;
        if (best < 0 || popcount(importers[v]! & mask) < popcount(importers[best]! & mask)) best = v;
      }
      placed.push(best);
      mask |= 1 << best;
    }
    return placed.map((v) => circle[v]!);
  }
  const size = 1 << n;
  const cost = new Uint16Array(size).fill(0xffff);
  const last = new Int8Array(size).fill(-1);
  cost[0] = 0;
  for (let mask = 0; mask < size; mask++) {
    if (cost[mask] === 0xffff) continue;
    for (let v = 0; v < n; v++) {
      if (mask & (1 << v)) continue;
      // Placing v above the rooms in mask: each of them that imports v now points up.
      const next = mask | (1 << v);
      const total = cost[mask]! + popcount(importers[v]! & mask);
      if (total < cost[next]!) {
        cost[next] = total;
        last[next] = v;
      }
    }
  }
  const order: string[] = [];
  for (let mask = size - 1; mask; mask &= ~(1 << last[mask]!)) order.unshift(circle[last[mask]!]!);
  return order;
}

// Tarjan yields the circles of rooms bottom-up (a room's imports before it), so concatenating their orders gives one.
const roomCircles = components(rooms, (room) => arrows.get(room)!.keys());
const position = new Map(roomCircles.flatMap(orderCircle).map((room, at) => [room, at]));
const backUp: Array<{ from: string; to: string; imports: string[] }> = [];
for (const [from, targets] of arrows) {
  for (const [to, imports] of targets) if (position.get(to)! > position.get(from)!) backUp.push({ from, to, imports });
}
const floor = new Map<string, number>();
for (const room of position.keys()) {
  const below = [...arrows.get(room)!.keys()].filter((to) => position.get(to)! < position.get(room)!);
  floor.set(room, below.length ? Math.max(...below.map((to) => floor.get(to)! + 1)) : 0);
}
const floors = Math.max(...floor.values()) + 1;
const fileCircles = components(files, (file) => fileEdges.get(file)!)
  .filter((circle) => circle.length > 1)
  .map((circle) => circle.map(rel));
const roomCirclesShown = roomCircles.filter((circle) => circle.length > 1);

/** A room's name as printed: the top folder is `(src)`. */
const name = (room: string): string => (room === '.' ? '(src)' : room);

const figures = {
  rooms: rooms.length,
  files: files.length,
  floors,
  arrows: arrowCount,
  backUp: backUp.length,
  roomCircles: roomCirclesShown.length,
  fileCircles: fileCircles.length,
  fileCirclesAcrossRooms: fileCircles.filter((circle) => new Set(circle.map(path.dirname)).size > 1).length,
};
if (json) {
  console.log(JSON.stringify({ ...figures, floorOf: Object.fromEntries(floor), backUp, roomCircles: roomCirclesShown, fileCircles }, null, 2));
} else {
  console.log(
    `${figures.rooms} rooms (${figures.files} files) on ${floors} floors, ${arrowCount} arrows, ${backUp.length} that run back up; ` +
      `circles: ${figures.roomCircles} of rooms, ${figures.fileCircles} of files (${figures.fileCirclesAcrossRooms} across rooms)`,
  );
  console.log('\nfloors (top first), each room with the rooms it imports:');
  for (let level = floors - 1; level >= 0; level--) {
    for (const room of rooms.filter((r) => floor.get(r) === level)) {
      const to = [...arrows.get(room)!.keys()].toSorted().map(name);
      console.log(`  ${level}  ${name(room).padEnd(22)} → ${to.join(', ') || '(nothing)'}`);
    }
  }
  console.log(`\narrows that run back up (${backUp.length}):`);
  for (const arrow of backUp) {
    console.log(`  ${name(arrow.from)} → ${name(arrow.to)} (floor ${floor.get(arrow.from)} → ${floor.get(arrow.to)})`);
    for (const line of arrow.imports) console.log(`      ${line}`);
  }
  console.log(`\ncircles of rooms (${roomCirclesShown.length}):`);
  for (const circle of roomCirclesShown) console.log(`  ${circle.map(name).join(', ')}`);
  console.log(`\ncircles of files (${fileCircles.length}):`);
  for (const circle of fileCircles) console.log(`  ${circle.join(', ')}`);
}
if (maxBackUp !== undefined && backUp.length > maxBackUp) {
  console.error(
    `\nscripts/house.ts: ${backUp.length} arrows run back up, more than ${maxBackUp}: move what sits in the wrong folder, or invert the dependency (listed above)`,
  );
  process.exitCode = 1;
}
