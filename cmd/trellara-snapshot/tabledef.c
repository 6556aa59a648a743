/*
 * tabledef.c - the DDL of --create-tables from a catalog description
 * (tabledef.h).  No I/O: the pieces are the source server's SQL text,
 * put around fixed keywords.
 */
#include "tabledef.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

static void seq_free(struct tabledef_seq *s)
{
	if (!s)
		return;
	free(s->schema);
	free(s->name);
	free(s->type);
	free(s->start);
	free(s->increment);
	free(s->min);
	free(s->max);
	free(s->cache);
	free(s);
}

static void constraints_free(struct tabledef_constraint *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].name);
		free(c[i].def);
		free(c[i].referenced_display);
		free(c[i].referenced_root_display);
	}
	free(c);
}

void tabledef_set_free(struct tabledef_set *set)
{
	for (size_t i = 0; i < set->n_tables; i++) {
		struct tabledef_table *t = &set->tables[i];
		free(t->schema);
		free(t->name);
		free(t->display);
		free(t->partkey);
		free(t->bound);
		free(t->replident_index);
		for (size_t k = 0; k < t->n_columns; k++) {
			struct tabledef_column *c = &t->columns[k];
			free(c->name);
			free(c->name_display);
			free(c->type);
			free(c->collation);
			free(c->default_expr);
			seq_free(c->seq);
		}
		free(t->columns);
		constraints_free(t->checks, t->n_checks);
		constraints_free(t->keys, t->n_keys);
		constraints_free(t->fkeys, t->n_fkeys);
		for (size_t k = 0; k < t->n_indexes; k++)
			free(t->indexes[k].def);
		free(t->indexes);
	}
	free(set->tables);
	set->tables = NULL;
	set->n_tables = 0;
}

struct tabledef_table *tabledef_set_add(struct tabledef_set *set)
{
	set->tables = xrealloc(set->tables, (set->n_tables + 1) * sizeof *set->tables);
	struct tabledef_table *t = &set->tables[set->n_tables++];
	memset(t, 0, sizeof *t);
	t->parent = -1;
	t->replident = 'd';
	return t;
}

void tabledef_stmts_free(struct tabledef_stmts *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->items[i].sql);
		free(s->items[i].note);
	}
	free(s->items);
	s->items = NULL;
	s->n = 0;
}

static void stmts_add(struct tabledef_stmts *s, const struct tabledef_table *t, char *sql, char *note)
{
	s->items = xrealloc(s->items, (s->n + 1) * sizeof *s->items);
	s->items[s->n++] = (struct tabledef_stmt){ .sql = sql, .note = note, .table_display = t->display };
}

static void add_seq_options(struct strbuf *b, const struct tabledef_seq *s)
{
	strbuf_addf(b, "START WITH %s INCREMENT BY %s MINVALUE %s MAXVALUE %s CACHE %s %s", s->start, s->increment, s->min,
		    s->max, s->cache, s->cycle ? "CYCLE" : "NO CYCLE");
}

/* A column of a table created on its own (not PARTITION OF). */
static void add_column(struct strbuf *b, const struct tabledef_column *c)
{
	strbuf_addf(b, "%s %s", c->name, c->type);
	if (c->collation)
		strbuf_addf(b, " COLLATE %s", c->collation);
	if (c->identity) {
		strbuf_addf(b, " GENERATED %s AS IDENTITY", c->identity == 'a' ? "ALWAYS" : "BY DEFAULT");
		if (c->seq) {
			strbuf_addf(b, " (SEQUENCE NAME %s.%s ", c->seq->schema, c->seq->name);
			add_seq_options(b, c->seq);
			strbuf_addch(b, ')');
		}
	} else if (c->generated && c->default_expr) {
		strbuf_addf(b, " GENERATED ALWAYS AS (%s) %s", c->default_expr, c->generated == 'v' ? "VIRTUAL" : "STORED");
	} else if (c->default_expr) {
		strbuf_addf(b, " DEFAULT %s", c->default_expr);
	}
	if (c->not_null)
		strbuf_adds(b, " NOT NULL");
}

static const struct tabledef_column *find_column(const struct tabledef_table *t, const char *name)
{
	for (size_t i = 0; i < t->n_columns; i++)
		if (strcmp(t->columns[i].name, name) == 0)
			return &t->columns[i];
	return NULL;
}

/* A partition's column: only what differs from its parent's (the rest
 * PARTITION OF takes from the parent).  false when nothing does. */
static bool add_partition_column(struct strbuf *b, const struct tabledef_column *c, const struct tabledef_table *parent)
{
	const struct tabledef_column *p = find_column(parent, c->name);
	bool not_null = c->not_null && (!p || !p->not_null);
	bool def = c->default_expr && !c->generated && !c->identity &&
		   (!p || !p->default_expr || p->generated || strcmp(p->default_expr, c->default_expr) != 0);
	if (!not_null && !def)
		return false;
	strbuf_addf(b, "%s WITH OPTIONS", c->name);
	if (def)
		strbuf_addf(b, " DEFAULT %s", c->default_expr);
	if (not_null)
		strbuf_adds(b, " NOT NULL");
	return true;
}

static void add_schema(struct tabledef_stmts *out, const struct tabledef_table *t, const char *schema)
{
	char *sql = xasprintf("CREATE SCHEMA IF NOT EXISTS %s", schema);
	for (size_t i = 0; i < out->n; i++)
		if (out->items[i].sql && strcmp(out->items[i].sql, sql) == 0) {
			free(sql);
			return;
		}
	stmts_add(out, t, sql, NULL);
}

static int check_types(const struct tabledef_set *set, char *err, size_t errlen)
{
	for (size_t i = 0; i < set->n_tables; i++) {
		const struct tabledef_table *t = &set->tables[i];
		for (size_t k = 0; k < t->n_columns; k++) {
			const struct tabledef_column *c = &t->columns[k];
			if (c->type_missing)
				return errbuf_setf(err, errlen,
						   "cannot create target table %s: column \"%s\" is of type %s, which the target"
						   " does not have (--create-tables creates no types)",
						   t->display, c->name_display, c->type);
			if (c->collation_missing)
				return errbuf_setf(err, errlen,
						   "cannot create target table %s: column \"%s\" has collation %s, which the target"
						   " does not have",
						   t->display, c->name_display, c->collation);
		}
	}
	return 0;
}

int tabledef_pre_data(const struct tabledef_set *set, struct tabledef_stmts *out, char *err, size_t errlen)
{
	if (check_types(set, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < set->n_tables; i++) {
		const struct tabledef_table *t = &set->tables[i];
		if (!t->schema_exists)
			add_schema(out, t, t->schema);
		for (size_t k = 0; k < t->n_columns; k++)
			if (t->parent < 0 && t->columns[k].seq && !t->columns[k].seq->schema_exists)
				add_schema(out, t, t->columns[k].seq->schema);
	}
	for (size_t i = 0; i < set->n_tables; i++) {
		const struct tabledef_table *t = &set->tables[i];
		const struct tabledef_table *parent = t->parent >= 0 ? &set->tables[t->parent] : NULL;
		/* the sequences its columns own (serial) first: their defaults
		 * name them; one a default calls without owning it may be
		 * shared by other tables' defaults, or be there already */
		for (size_t k = 0; k < t->n_columns && !parent; k++) {
			const struct tabledef_seq *s = t->columns[k].seq;
			if (!s || t->columns[k].identity)
				continue;
			struct strbuf b = STRBUF_INIT;
			strbuf_addf(&b, "CREATE SEQUENCE %s%s.%s AS %s ", s->by_default ? "IF NOT EXISTS " : "", s->schema, s->name,
				    s->type);
			add_seq_options(&b, s);
			stmts_add(out, t, strbuf_detach(&b, NULL), NULL);
		}
		struct strbuf b = STRBUF_INIT;
		strbuf_addf(&b, "CREATE %sTABLE %s.%s ", t->unlogged ? "UNLOGGED " : "", t->schema, t->name);
		if (parent)
			strbuf_addf(&b, "PARTITION OF %s.%s ", parent->schema, parent->name);
		size_t open = b.len;
		strbuf_addch(&b, '(');
		bool any = false;
		for (size_t k = 0; k < t->n_columns; k++) {
			struct strbuf col = STRBUF_INIT;
			if (parent) {
				if (!add_partition_column(&col, &t->columns[k], parent)) {
					strbuf_release(&col);
					continue;
				}
			} else {
				add_column(&col, &t->columns[k]);
			}
			strbuf_addf(&b, "%s%s", any ? ", " : "", col.buf);
			strbuf_release(&col);
			any = true;
		}
		for (size_t k = 0; k < t->n_checks; k++) {
			if (parent && t->checks[k].inherited)
				continue;
			strbuf_addf(&b, "%sCONSTRAINT %s %s", any ? ", " : "", t->checks[k].name, t->checks[k].def);
			any = true;
		}
		if (parent && !any) {
			/* no column list at all: "PARTITION OF p ()" is a syntax error */
			b.len = open;
			b.buf[b.len] = '\0';
		} else {
			strbuf_adds(&b, ") ");
		}
		if (parent)
			strbuf_addf(&b, "%s", t->bound);
		if (t->partkey)
			strbuf_addf(&b, "%sPARTITION BY %s", parent ? " " : "", t->partkey);
		while (b.len && b.buf[b.len - 1] == ' ')
			b.buf[--b.len] = '\0';
		stmts_add(out, t, strbuf_detach(&b, NULL), NULL);
		for (size_t k = 0; k < t->n_columns && !parent; k++) {
			const struct tabledef_seq *s = t->columns[k].seq;
			if (s && !t->columns[k].identity && !s->by_default)
				stmts_add(out, t,
					  xasprintf("ALTER SEQUENCE %s.%s OWNED BY %s.%s.%s", s->schema, s->name, t->schema, t->name,
						    t->columns[k].name),
					  NULL);
		}
		if (t->replident == 'f' || t->replident == 'n')
			stmts_add(out, t,
				  xasprintf("ALTER TABLE %s.%s REPLICA IDENTITY %s", t->schema, t->name,
					    t->replident == 'f' ? "FULL" : "NOTHING"),
				  NULL);
	}
	return 0;
}

static bool in_flow(const char *display, const char *const *flow_display, size_t n_flow)
{
	for (size_t i = 0; display && i < n_flow; i++)
		if (strcmp(display, flow_display[i]) == 0)
			return true;
	return false;
}

void tabledef_post_data(const struct tabledef_set *set, const char *const *flow_display, size_t n_flow,
			struct tabledef_stmts *out)
{
	tabledef_post_data_keys(set, 0, set->n_tables, out);
	tabledef_post_data_fkeys(set, 0, set->n_tables, flow_display, n_flow, out);
}

void tabledef_post_data_keys(const struct tabledef_set *set, size_t from, size_t to, struct tabledef_stmts *out)
{
	for (size_t i = from; i < to && i < set->n_tables; i++) {
		const struct tabledef_table *t = &set->tables[i];
		bool partition = t->parent >= 0;
		for (size_t k = 0; k < t->n_keys; k++)
			if (!partition || !t->keys[k].inherited)
				stmts_add(out, t,
					  xasprintf("ALTER TABLE %s.%s ADD CONSTRAINT %s %s", t->schema, t->name, t->keys[k].name,
						    t->keys[k].def),
					  NULL);
		for (size_t k = 0; k < t->n_indexes; k++)
			if (!partition || !t->indexes[k].inherited)
				stmts_add(out, t, tabledef_index_sql(t->indexes[k].def), NULL);
		if (t->replident == 'i' && t->replident_index)
			stmts_add(out, t,
				  xasprintf("ALTER TABLE %s.%s REPLICA IDENTITY USING INDEX %s", t->schema, t->name,
					    t->replident_index),
				  NULL);
	}
}

void tabledef_post_data_fkeys(const struct tabledef_set *set, size_t from, size_t to, const char *const *flow_display,
			      size_t n_flow, struct tabledef_stmts *out)
{
	for (size_t i = from; i < to && i < set->n_tables; i++) {
		const struct tabledef_table *t = &set->tables[i];
		for (size_t k = 0; k < t->n_fkeys; k++) {
			const struct tabledef_constraint *f = &t->fkeys[k];
			if (t->parent >= 0 && f->inherited)
				continue;
			if (in_flow(f->referenced_display, flow_display, n_flow) ||
			    in_flow(f->referenced_root_display, flow_display, n_flow))
				stmts_add(out, t, xasprintf("ALTER TABLE %s.%s ADD CONSTRAINT %s %s", t->schema, t->name, f->name, f->def),
					  NULL);
			else
				stmts_add(out, t, NULL,
					  xasprintf("foreign key %s of %s not created: it references %s, which is not in dataset.tables",
						    f->name, t->display, f->referenced_display ? f->referenced_display : "?"));
		}
	}
}

char *tabledef_index_sql(const char *indexdef)
{
	static const char only[] = " ON ONLY ";
	bool quoted = false;
	for (const char *p = indexdef; *p; p++) {
		if (*p == '"')
			quoted = !quoted;
		else if (!quoted && strncmp(p, only, sizeof only - 1) == 0)
			return xasprintf("%.*s ON %s", (int)(p - indexdef), indexdef, p + sizeof only - 1);
	}
	return xstrdup(indexdef);
}
