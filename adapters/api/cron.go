package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
)

// Cron is the scheduled jobs the API serves (cronjobs.Manager is one).
type Cron interface {
	// List returns every job. Errors: Unavailable.
	List(ctx context.Context) ([]cronjobs.Job, error)
	// Show returns a job (an id or a unique prefix of one) and its
	// recent runs, newest first. Errors: NotFound, Unavailable.
	Show(ctx context.Context, id string) (cronjobs.Job, []cronjobs.Run, error)
	// RunNow asks for the job to fire now, by whichever instance claims
	// it. Errors: NotFound, Unavailable.
	RunNow(ctx context.Context, id string) (cronjobs.Job, error)
}

// cronJob is a job as the API answers it, with its recent runs when
// one job is asked for.
type cronJob struct {
	cronjobs.Job
	Runs []cronjobs.Run `json:"runs,omitempty"`
}

// CronRoutes are the scheduled jobs' routes under /api/v1/cron, served
// by jobs.
func CronRoutes(jobs Cron) Routes { return cronRoutes{jobs} }

type cronRoutes struct{ jobs Cron }

func (c cronRoutes) mount(s *Server) {
	s.cron = c.jobs
	s.route("GET", "/api/v1/cron/jobs", s.listCronJobs)
	s.route("GET", "/api/v1/cron/jobs/{id}", s.getCronJob)
	s.route("POST", "/api/v1/cron/jobs/{id}/run", s.runCronJob)
}

func (s *Server) listCronJobs(w http.ResponseWriter, r *http.Request) {
	jobs, err := s.cron.List(r.Context())
	if err != nil {
		s.failCron(w, r, err)
		return
	}
	if jobs == nil {
		jobs = []cronjobs.Job{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
}

func (s *Server) getCronJob(w http.ResponseWriter, r *http.Request) {
	j, runs, err := s.cron.Show(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failCron(w, r, err)
		return
	}
	if runs == nil {
		runs = []cronjobs.Run{}
	}
	writeJSON(w, http.StatusOK, cronJob{Job: j, Runs: runs})
}

// runCronJob fires a job now, through the same once-only claim as its
// scheduled fires; it answers 202 with the job, its run requested.
func (s *Server) runCronJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.cron.RunNow(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failCron(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, cronJob{Job: j})
}

func (s *Server) failCron(w http.ResponseWriter, r *http.Request, err error) {
	if errs.Is(err, errs.NotFound) {
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no cron job %q", r.PathValue("id")))
		return
	}
	s.fail(w, r, err)
}
