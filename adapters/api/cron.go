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
	// Pause stops the job firing until Resume. Errors: NotFound,
	// Unavailable.
	Pause(ctx context.Context, id string) (cronjobs.Job, error)
	// Resume lets the job fire again, from now. Errors: NotFound,
	// Invalid, Unavailable.
	Resume(ctx context.Context, id string) (cronjobs.Job, error)
	// Output returns the saved output of one of the job's runs.
	// Errors: NotFound, Unavailable.
	Output(ctx context.Context, id, run string) (string, error)
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
	s.route("GET", "/api/v1/cron/jobs", s.live(s.listCronJobs))
	s.route("GET", "/api/v1/cron/jobs/{id}", s.live(s.getCronJob))
	s.route("POST", "/api/v1/cron/jobs/{id}/run", s.runCronJob)
	s.route("POST", "/api/v1/cron/jobs/{id}/pause", s.changeCronJob(c.jobs.Pause))
	s.route("POST", "/api/v1/cron/jobs/{id}/resume", s.changeCronJob(c.jobs.Resume))
	s.route("GET", "/api/v1/cron/jobs/{id}/runs/{run}/output", s.cronRunOutput)
}

func (s *Server) listCronJobs(w http.ResponseWriter, r *http.Request) {
	jobs, err := s.cron.List(r.Context())
	if err != nil {
		s.failCron(w, r, err)
		return
	}
	views := make([]cronJobView, len(jobs))
	for i, j := range jobs {
		views[i] = cronJobView{Job: j, ScheduleText: j.Schedule.String()}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": views})
}

// cronJobView is a job as the list shows it: with its schedule said in
// words ("every 30m", "cron 0 9 * * 1-5 (UTC)") beside the fields.
type cronJobView struct {
	cronjobs.Job
	ScheduleText string `json:"schedule_text"`
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

// changeCronJob answers a change of a job made by change: 200 with the
// job as it is now.
func (s *Server) changeCronJob(change func(context.Context, string) (cronjobs.Job, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		j, err := change(r.Context(), r.PathValue("id"))
		if err != nil {
			s.failCron(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, cronJob{Job: j})
	}
}

// cronRunOutput answers what a run of a job wrote, as {"output": text}.
func (s *Server) cronRunOutput(w http.ResponseWriter, r *http.Request) {
	out, err := s.cron.Output(r.Context(), r.PathValue("id"), r.PathValue("run"))
	if err != nil {
		s.failCron(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"output": out})
}

func (s *Server) failCron(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errs.Is(err, errs.NotFound) && r.PathValue("run") != "":
		writeError(w, http.StatusNotFound, typeNotFound, reason(err))
	case errs.Is(err, errs.NotFound):
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no cron job %q", r.PathValue("id")))
	case errs.Is(err, errs.Conflict):
		writeError(w, http.StatusConflict, typeConflict, reason(err))
	default:
		s.fail(w, r, err)
	}
}
