#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  size_t B=atoi(argv[1])*1024; int iters=atoi(argv[2]);
  char **shp=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  int pfd[2]; pipe(pfd);
  pid_t child=fork();
  if(child==0){ char *buf=malloc(B); memset(buf,1,B); shp[0]=buf; write(pfd[1],"x",1); pause(); return 0; }
  char c; read(pfd[0],&c,1);
  char *mine=malloc(B); memset(mine,2,B);
  for(int mode=0;mode<2;mode++){
    struct iovec l={mine,B}, r={shp[0],B};
    for(int i=0;i<50;i++) mode? process_vm_readv(child,&l,1,&r,1,0) : process_vm_writev(child,&l,1,&r,1,0);
    double best=1e9,sum=0;
    for(int i=0;i<iters;i++){double t=now(); ssize_t n= mode? process_vm_readv(child,&l,1,&r,1,0) : process_vm_writev(child,&l,1,&r,1,0); double e=now()-t; if(n!=(ssize_t)B){perror("cma");return 1;} sum+=e; if(e<best)best=e;}
    printf("%zuK %s: mean %.2f best %.2f us\n",B/1024,mode?"readv":"writev",sum/iters,best);
  }
  kill(child,9); wait(0); return 0; }
