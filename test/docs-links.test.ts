// The docs are split by topic across README.md and docs/: a link to a page or a heading that moved must
// fail here, not in a newcomer's browser. Anchors follow GitHub's slugs.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');

/** README.md and every Markdown page under docs/. */
function markdownFiles(): string[] {
  const pages = readdirSync(path.join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => path.join('docs', name));
  return ['README.md', ...pages].toSorted();
}

/** Text outside fenced code blocks, where a `[x](y)` is code, not a link. */
function prose(markdown: string): string {
  return markdown.replaceAll(/^```[\s\S]*?^```/gm, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2, … */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = (heading as string).replaceAll(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replaceAll(/[^\p{L}\p{N}\s_-]/gu, '')
      .replaceAll(' ', '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Every relative link of a page that does not resolve: a missing file, or a heading its target lacks. */
function brokenLinks(file: string): string[] {
  const markdown = readFileSync(path.join(root, file), 'utf8');
  const broken: string[] = [];
  for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const link = target as string;
    if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
    const [pathPart = '', anchor] = link.split('#') as [string, string | undefined];
    const targetFile = pathPart === '' ? file : path.join(path.dirname(file), decodeURIComponent(pathPart));
    if (!existsSync(path.join(root, targetFile))) {
      broken.push(`${file}: ${link} (no file ${targetFile})`);
      continue;
    }
    if (anchor !== undefined && targetFile.endsWith('.md')) {
      const anchors = anchorsOf(readFileSync(path.join(root, targetFile), 'utf8'));
      if (!anchors.has(decodeURIComponent(anchor))) broken.push(`${file}: ${link} (no heading #${anchor} in ${targetFile})`);
    }
  }
  return broken;
}

describe('the docs’ links', () => {
  it('slugs headings as GitHub does', () => {
    const anchors = anchorsOf('# Klym\n## The session pool (`packages/core/src/pool/`)\n## Issue #12: a task’s CPU\n## Klym\n');
    expect([...anchors]).toEqual(['klym', 'the-session-pool-packagescoresrcpool', 'issue-12-a-tasks-cpu', 'klym-1']);
  });

  it('resolve: every relative link in README.md and docs/ names a file that exists and a heading it has', () => {
    const files = markdownFiles();
    expect(files).toContain('docs/configuration.md');
    expect(files.flatMap(brokenLinks)).toEqual([]);
  });
});
